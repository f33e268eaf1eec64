#!/bin/sh
# workerd, started by Miniflare through MINIFLARE_WORKERD_PATH (runner-host/cli/workerd-session.ts):
# in a session of its own, so signals sent to svc's process group do not reach it, and killed
# when svc dies. Each step execs, so workerd keeps the pid Miniflare spawned.
exec setsid setpriv --pdeathsig KILL -- "$SVC_WORKERD_BIN" "$@"
