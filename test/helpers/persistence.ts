/**
 * Helpers for persistence end-to-end tests: a stack with a scripted provider and a persistence
 * block, turns driven over HTTP and waited on over SSE, and the stored objects read back.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { expect } from "vitest";
import type { ScriptedProvider } from "../../examples/scripted-provider.ts";
import { call } from "./api.ts";
import { openSse, type SseStream } from "./sse.ts";
import { REFERENCE_HARNESSES, secret } from "./stack.ts";

export const TOKEN = secret("persist-manage");

export function stackConfig(provider: ScriptedProvider, persistence: Record<string, unknown> | null) {
  return {
    tokens: [{ token_env: "MANAGE", tenant: "t", manage: true }],
    harnesses: REFERENCE_HARNESSES,
    providers: { openai: { api_key_env: "OPENAI_KEY", base_url: provider.url, api: "openai-completions" } },
    persistence,
  };
}

export const baseEnv = { MANAGE: TOKEN, OPENAI_KEY: "sk-persist" };

export type Live = { id: string; sse: SseStream };

export async function createSession(url: string): Promise<Live> {
  const r = await call(url, "POST", "/sessions", { token: TOKEN, body: { harness: "pi", config: { model: "openai/gpt-4o-mini", tools: [] } } });
  expect(r.status).toBe(201);
  return { id: r.body.id, sse: await openSse(`${url}/sessions/${r.body.id}/events`, { token: TOKEN }) };
}

/** Sends a message and waits for its turn to end idle; returns the session's checkpoint after it. */
export async function turn(url: string, s: Live, text: string): Promise<{ id: string; offset: number }> {
  const m = await call(url, "POST", `/sessions/${s.id}/events`, { token: TOKEN, body: { type: "user.message", text } });
  expect(m.status).toBe(202);
  await s.sse.waitFor((f) => f.event === "session.status" && f.json.data.status === "idle" && f.json.input_id === m.body.id);
  return (await call(url, "GET", `/sessions/${s.id}`, { token: TOKEN })).body.checkpoint;
}

export async function allEvents(url: string, id: string): Promise<{ id: string; type: string; cursor: string }[]> {
  const out = [];
  for (let after = ""; ; ) {
    const p = (await call(url, "GET", `/sessions/${id}/events?limit=1000&after=${encodeURIComponent(after)}`, { token: TOKEN })).body;
    if (p.events.length === 0) return out;
    out.push(...p.events);
    after = p.next_cursor;
  }
}

/**
 * Events without their cursors: a session loaded from storage continues in a new log epoch, so
 * its events carry new cursors (the old ones keep working up to the stored history's end).
 */
export function uncursored(events: readonly unknown[]): unknown[] {
  return events.map((x) => {
    const { cursor: _c, ...e } = x as { cursor?: string };
    return e;
  });
}

/** The NDJSON history as the service defines it: one line per retained event, without cursor. */
export function ndjson(events: Record<string, unknown>[]): string {
  return events.map(({ cursor: _c, ...e }) => `${JSON.stringify(e)}\n`).join("");
}

/**
 * Every file under `dir`, relative path → bytes. A file gone between the listing and its read is
 * left out: another session's upload in flight renames its temporary file into place.
 */
export function readTree(dir: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  const walk = (d: string) => {
    for (const name of readdirSync(d)) {
      const p = path.join(d, name);
      try {
        if (statSync(p).isDirectory()) walk(p);
        else out.set(path.relative(dir, p), readFileSync(p));
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e;
      }
    }
  };
  walk(dir);
  return out;
}

/**
 * Checks stored history blocks: each at most 64 KiB (or one line alone), whole lines only, and
 * for the blocks a manifest names: contiguous from 0, together the history's prefix.
 */
export function expectBlocks(blocks: { key: string; body: Buffer }[], history: string): void {
  for (const b of blocks) {
    const text = b.body.toString("utf8");
    expect(text.endsWith("\n")).toBe(true);
    if (b.body.byteLength > 64 * 1024) expect(text.slice(0, -1).includes("\n")).toBe(false);
    const m = /blocks\/(\d{16})-(\d{16})-[0-9a-f]{16}\.ndjson$/.exec(b.key)!;
    expect(m).not.toBeNull();
    expect(Number(m[2]) - Number(m[1])).toBe(b.body.byteLength);
    expect(Buffer.from(history).subarray(Number(m[1]), Number(m[2])).toString("utf8")).toBe(text);
  }
}
