/**
 * The session's side of runtime tools and credential overrides.
 *
 * Runtime call lifecycle: the runner-host announces a dispatched `tool_call` of a runtime tool →
 * the object records it (`tool.call`) and then dispatches it to the binding's current executor →
 * the executor's progress is published live, its result is checked against the tool's descriptor
 * and goes down the runner link as `tool_reply` → the runner-host checks it too and answers with `tool_result`, which records `tool.result`. When
 * a call's `tool.result` is recorded any other way (interrupt, close, runner-host lost, timeout),
 * the executor is told to cancel it and a late reply is refused; a reply accepted before that
 * (kept in `runtime_calls.result`) is what work's end records instead of an unknown outcome.
 *
 * Storage: `runtime_calls` (call id, executor, tool name, whether a result was passed on, and that
 * result); the bindings in
 * `session.bindings`. Credential overrides are decrypted here only when a call needs one — for an
 * executor call as it is dispatched, for a host tool when the runner-host asks — and the plaintext
 * is never written to SQLite, a log or an event.
 */
import type { Event, Tool } from "../shared/api-schema.ts";
import type { Env } from "../env.ts";
import type { Dispatch, Dispatched } from "../shared/executor-protocol.ts";
import { conflict, invalid, type Result } from "../shared/errors.ts";
import { newId } from "../shared/ids.ts";
import type { ToolResult } from "../shared/result-schema.ts";
import { checkRuntimeResult } from "../shared/runtime-result.ts";
import type { CredentialValue, LinkDown, ToolRoute } from "../shared/runner-protocol.ts";
import { log } from "../log.ts";
import { getRuntime } from "../runtime.ts";
import { bindingOf, mergeParameters, sameJson, type StoredBinding } from "./bindings.ts";
import { decryptCredential } from "./credentials.ts";
import type { EncryptedCredential, SessionRow } from "./record.ts";
import type { RunnerLink } from "./runner-link.ts";
import type { SessionState } from "./session-state.ts";

export function bindingsOf(row: SessionRow): StoredBinding[] {
  return JSON.parse(row.bindings) as StoredBinding[];
}

/** What the runner-host needs to route the session's bound tools (the `open` message). */
export function toolRoutes(row: SessionRow): ToolRoute[] {
  const withCredential = new Set(row.credential_bindings ? (JSON.parse(row.credential_bindings) as string[]) : []);
  return bindingsOf(row).flatMap((b) =>
    b.tools.map((tool) => {
      const r: ToolRoute = { tool, alias: b.alias, runtime: b.executor !== undefined && (b.runtime ?? []).some((t) => t.name === tool), credential: withCredential.has(b.alias) };
      if (b.parameters) r.parameters = b.parameters;
      return r;
    }),
  );
}

type RuntimeCall = { call_id: string; executor: string; replied: number; tool: string | null };

export class RuntimeCalls {
  readonly #s: SessionState;
  readonly #link: RunnerLink;
  readonly #env: Env;

  constructor(state: SessionState, link: RunnerLink, env: Env) {
    this.#s = state;
    this.#link = link;
    this.#env = env;
  }

  get #sql() {
    return this.#s.storage.sql;
  }

  /** The binding serving `name` when it is a runtime tool. */
  #runtimeBinding(row: SessionRow, name: string): StoredBinding | undefined {
    const b = bindingOf(bindingsOf(row), name);
    return b?.executor !== undefined && (b.runtime ?? []).some((t) => t.name === name) ? b : undefined;
  }

  /**
   * After a dispatched `tool_call` was recorded: sends a runtime call to its executor. A call that
   * cannot be sent is answered at once (no executor: nothing happened; an RPC failure: maybe it did).
   */
  async dispatch(callId: string, name: string, args: unknown): Promise<void> {
    const row = this.#s.row();
    const b = row && this.#runtimeBinding(row, name);
    if (!row || !b) return;
    this.#sql.exec("INSERT OR IGNORE INTO runtime_calls (call_id, executor, tool) VALUES (?, ?, ?)", callId, b.executor!, name);
    const d: Dispatch = {
      call_id: callId,
      tool: name,
      arguments: mergeParameters(args, b.parameters),
      scope: { tenant_id: row.tenant, session_id: row.id, call_id: callId },
      session: `${row.id}:${row.tenant}`,
    };
    let result: ToolResult | undefined;
    try {
      const credential = await this.#decrypt(row, b.alias);
      if (credential !== undefined) d.credential = credential;
    } catch (e) {
      log("warn", "credential override could not be decrypted", { session_id: row.id, alias: b.alias, error: e instanceof Error ? e.message : "error" });
      result = errorResult(`tool "${name}" could not use its credential override: its key was removed or changed`, false);
    }
    if (!result) {
      try {
        const r = (await this.#env.EXECUTORS.getByName(b.executor!).dispatch(d)) as Result<Dispatched>;
        result = r.ok ? r.value.result : errorResult(`tool "${name}" is unavailable: its executor is not registered`, false);
      } catch (e) {
        log("error", "executor dispatch failed", { session_id: row.id, call_id: callId, error: String(e) });
        result = errorResult(`tool "${name}" could not be handed to its executor; its outcome is unknown`, true);
      }
    }
    if (result) this.reply(callId, result);
  }

  /** The executor's result (or its unknown outcome): passed to the runner-host once. */
  reply(callId: string, result: ToolResult): Result<void> {
    return this.#s.storage.transactionSync(() => {
      const rc = this.#open(callId);
      if (!rc || rc.replied) return { ok: false, error: conflict("the call is not waiting for a result").toBody() };
      // Checked now, not only by the runner-host: work ending before its tool_result records this one.
      const checked = this.#checked(rc, result);
      // Kept: if work ends before the runner-host records it, this is still the call's result.
      this.#sql.exec("UPDATE runtime_calls SET replied = 1, result = ? WHERE call_id = ?", JSON.stringify(checked), callId);
      this.#link.push({ t: "tool_reply", call_id: callId, result: checked });
      return { ok: true, value: undefined };
    });
  }

  /** `result` as its tool's descriptor takes it (src/shared/runtime-result.ts). */
  #checked(rc: RuntimeCall, result: ToolResult): ToolResult {
    const row = rc.tool === null ? undefined : this.#s.row();
    const d = row && this.#runtimeBinding(row, rc.tool!)?.runtime?.find((t) => t.name === rc.tool);
    return d ? checkRuntimeResult(d, result) : result;
  }

  /** A progress frame of an open call, as the live event to publish (undefined: the call ended). */
  progress(callId: string, data: unknown, now: string): Event | undefined {
    const rc = this.#open(callId);
    if (!rc || rc.replied) return undefined;
    const inputId = this.#sql.exec<{ input_id: string }>("SELECT input_id FROM open_calls WHERE call_id = ?", callId).one().input_id;
    return { id: newId(), type: "tool.progress", time: now, data: { call_id: callId, data }, input_id: inputId };
  }

  /** Calls whose `tool.result` was just recorded: executors still working on them are told to stop. */
  ended(callIds: string[]): void {
    for (const id of callIds) {
      const rc = this.#sql.exec<RuntimeCall>("SELECT * FROM runtime_calls WHERE call_id = ?", id).toArray()[0];
      if (!rc) continue;
      this.#sql.exec("DELETE FROM runtime_calls WHERE call_id = ?", id);
      if (rc.replied) continue;
      this.#env.EXECUTORS.getByName(rc.executor)
        .cancel(id)
        .catch((e: unknown) => log("warn", "executor cancel failed", { call_id: id, error: String(e) }));
    }
  }

  /** The runner-host asks for a host tool call's override: decrypted now, sent once, not stored. */
  async credential(callId: string): Promise<Extract<LinkDown, { t: "credential" }>> {
    const row = this.#s.require();
    const call = this.#sql.exec<{ tool: string | null }>("SELECT tool FROM open_calls WHERE call_id = ?", callId).toArray()[0];
    const b = call?.tool ? bindingOf(bindingsOf(row), call.tool) : undefined;
    if (!b) return { t: "credential", call_id: callId, error: "the call is not open or has no binding" };
    try {
      const value = await this.#decrypt(row, b.alias);
      if (value === undefined) return { t: "credential", call_id: callId, error: "the binding has no credential override" };
      return { t: "credential", call_id: callId, value };
    } catch (e) {
      log("warn", "credential override could not be decrypted", { session_id: row.id, alias: b.alias, error: e instanceof Error ? e.message : "error" });
      return { t: "credential", call_id: callId, error: "its key was removed or changed" };
    }
  }

  /**
   * Rebinding after an executor restart: the session must have a runtime binding `alias` whose
   * descriptors equal `tools`; it then routes to `executor`. In a transaction.
   */
  rebind(alias: string, tools: Tool[], executor: string, now: string): void {
    const row = this.#s.require();
    if (row.status === "closed") throw conflict("the session is closed");
    const bindings = bindingsOf(row);
    const b = bindings.find((x) => x.alias === alias);
    const others = (JSON.parse(row.descriptors) as Tool[]).map((t) => t.name).filter((n) => !b?.tools.includes(n));
    // Only a tool the binding enables can clash: one `operations` leaves out was never in the session.
    const clash = tools.find((t) => (!b || b.tools.includes(t.name)) && others.includes(t.name));
    if (clash) throw invalid(`tools: "${clash.name}" clashes with another tool of the session`);
    if (!b || b.executor === undefined) throw conflict(`the session has no runtime binding "${alias}"`);
    if (!sameJson(b.runtime, tools)) throw conflict(`tools differ from the descriptors of binding "${alias}"`);
    b.executor = executor;
    const config = JSON.parse(row.config) as { bindings?: { alias: string; executor?: string }[] };
    for (const cb of config.bindings ?? []) if (cb.alias === alias) cb.executor = executor;
    this.#sql.exec(
      "UPDATE session SET bindings = ?, config = ?, updated_at = ?, version = version + 1",
      JSON.stringify(bindings),
      JSON.stringify(config),
      now,
    );
  }

  #open(callId: string): RuntimeCall | undefined {
    const open = this.#sql.exec("SELECT 1 FROM open_calls WHERE call_id = ?", callId).toArray().length > 0;
    if (!open) return undefined;
    return this.#sql.exec<RuntimeCall>("SELECT * FROM runtime_calls WHERE call_id = ?", callId).toArray()[0];
  }

  /** The alias's override, decrypted (undefined: none). Throws when it cannot be decrypted. */
  async #decrypt(row: SessionRow, alias: string): Promise<CredentialValue | undefined> {
    const c = this.#sql.exec<EncryptedCredential>("SELECT alias, key_id, iv, ciphertext FROM credentials WHERE alias = ?", alias).toArray()[0];
    if (!c) return undefined;
    const rt = await getRuntime(this.#env);
    return (await decryptCredential(rt.config, rt.vars, { tenant: row.tenant, sessionId: row.id }, c)) as CredentialValue;
  }
}

function errorResult(text: string, unknownOutcome: boolean): ToolResult {
  const r: ToolResult = { content: [{ type: "text", text }], is_error: true };
  if (unknownOutcome) r.unknown_outcome = true;
  return r;
}
