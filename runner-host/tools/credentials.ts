/**
 * A session's credential overrides as host tool calls fetch them: asked of the object when a call
 * needs one, answered over the link without being stored there, held only by the waiting call.
 * A question lost with a dropped socket is asked again once the link reconnects.
 */
import type { CredentialValue } from "../../src/shared/runner-protocol.ts";
import type { LiveDown } from "../link.ts";

type Waiter = { resolve(v: CredentialValue | { error: string }): void };

export class SessionCredentials {
  readonly #send: (callId: string) => boolean;
  #waiting = new Map<string, Waiter>();

  /** `send` asks the object (false while the socket is down: asked again on reconnect). */
  constructor(send: (callId: string) => boolean) {
    this.#send = send;
  }

  ask(callId: string, signal: AbortSignal): Promise<CredentialValue | { error: string }> {
    return new Promise((resolve) => {
      const done = (v: CredentialValue | { error: string }) => {
        this.#waiting.delete(callId);
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      };
      const onAbort = () => done({ error: "the call was stopped before its credential arrived" });
      if (signal.aborted) return onAbort();
      signal.addEventListener("abort", onAbort, { once: true });
      this.#waiting.set(callId, { resolve: done });
      this.#send(callId);
    });
  }

  answer(m: LiveDown): void {
    const w = this.#waiting.get(m.call_id);
    if (!w) return;
    w.resolve(m.value !== undefined ? m.value : { error: m.error ?? "no credential" });
  }

  askAgain(): void {
    for (const callId of this.#waiting.keys()) this.#send(callId);
  }
}
