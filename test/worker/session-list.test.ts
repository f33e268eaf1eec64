/**
 * docs/api.md "Sessions": a page of `GET /sessions` holds at most `limit` sessions and stops before
 * 8 MiB of session JSON (it always holds one), then says where the next page starts
 * (`next_after`). Sessions with large instructions or tool descriptors made a page of 1,000 over the
 * runtime's 32 MiB limit for one call from the tenant index, and the list answered `500`.
 */
import { describe, expect, it } from "vitest";
import type { Session, SessionList } from "../../src/shared/api-schema.ts";
import { newId } from "../../src/shared/ids.ts";
import { api, env, TENANT } from "./helpers.ts";

const TIME = "2026-01-01T00:00:00.000Z";
const MiB = 1024 * 1024;

function body(id: string, bytes: number): string {
  const s = { id, harness: "pi", config: { model: "openai/m", tools: [], instructions: "" }, status: "idle", created_at: TIME, updated_at: TIME, descriptors: [] } satisfies Session;
  const shell = JSON.stringify(s).length;
  return JSON.stringify({ ...s, config: { ...s.config, instructions: "x".repeat(bytes - shell) } });
}

async function page(query: string): Promise<SessionList> {
  const res = await api(`/sessions${query}`);
  expect(res.status).toBe(200);
  return (await res.json()) as SessionList;
}

describe("GET /sessions: a page within 8 MiB", () => {
  it("stops short of limit before passing 8 MiB of sessions and names the next page's after", async () => {
    const index = env.TENANTS.getByName(TENANT);
    const ids = Array.from({ length: 6 }, () => newId()).sort();
    // The index keeps a session's JSON in one SQLite row (at most 2 MB): five of these are exactly 8 MiB.
    const ROW = 1_900_000;
    const sizes = [ROW, ROW, ROW, ROW, 8 * MiB - 4 * ROW, ROW];
    for (const [i, id] of ids.entries()) await index.upsert(id, 1, body(id, sizes[i]!));
    const ofPage = (p: SessionList) => ({ ids: p.sessions.map((s) => s.id), next_after: p.next_after });

    expect(ofPage(await page(""))).toEqual({ ids: ids.slice(0, 5), next_after: ids[4] });
    expect(ofPage(await page(`?after=${ids[4]}`))).toEqual({ ids: [ids[5]], next_after: undefined });
    expect(ofPage(await page(`?after=${ids[5]}`))).toEqual({ ids: [], next_after: undefined });
    // Stopped by its limit, a page is as before: no next_after.
    expect(ofPage(await page("?limit=2"))).toEqual({ ids: ids.slice(0, 2), next_after: undefined });
    // One byte more and the fifth session starts the next page.
    await index.upsert(ids[4]!, 2, body(ids[4]!, 8 * MiB - 4 * ROW + 1));
    expect(ofPage(await page(""))).toEqual({ ids: ids.slice(0, 4), next_after: ids[3] });
  });
});
