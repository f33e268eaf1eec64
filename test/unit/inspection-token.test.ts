/**
 * Inspection tokens (docs/api.md "Tools"): minted by the runner-host for one
 * tool call, verified by the Worker with a key derived from the same runner secret.
 */
import { describe, expect, it } from "vitest";
import { INSPECTION_GRACE_MS, isInspectionToken, mintInspectionToken, verifyInspectionToken } from "../../src/shared/inspection-token.ts";

const SECRET = "runner-secret-of-at-least-32-bytes!!";
const SCOPE = { tenant: "acme", session: "ab".repeat(16), call: "cd".repeat(16) };
const NOW = Date.parse("2026-01-01T00:00:00Z");
const TIMEOUT_S = 300;
const EXPIRY = NOW + TIMEOUT_S * 1000 + INSPECTION_GRACE_MS;

const mint = () => mintInspectionToken(SECRET, SCOPE, TIMEOUT_S, NOW);

describe("inspection tokens", () => {
  it("verify to the tenant, session and tool call they were minted for", async () => {
    const token = await mint();
    expect(isInspectionToken(token)).toBe(true);
    expect(await verifyInspectionToken(SECRET, token, NOW)).toEqual(SCOPE);
  });

  it("are valid for the tool call's timeout plus the grace period, and not a millisecond longer", async () => {
    const token = await mint();
    expect(await verifyInspectionToken(SECRET, token, EXPIRY - 1)).toEqual(SCOPE);
    expect(await verifyInspectionToken(SECRET, token, EXPIRY)).toBeUndefined();
  });

  it("are refused when signed with another runner secret", async () => {
    expect(await verifyInspectionToken(`${SECRET}-rotated`, await mint(), NOW)).toBeUndefined();
  });

  it("are refused when their claims or their signature were altered", async () => {
    const [body, mac] = (await mint()).slice("svci.".length).split(".") as [string, string];
    const other = (await mintInspectionToken(SECRET, { ...SCOPE, session: "ef".repeat(16) }, TIMEOUT_S, NOW)).split(".")[1]!;
    expect(await verifyInspectionToken(SECRET, `svci.${other}.${mac}`, NOW)).toBeUndefined();
    const flipped = mac.slice(0, -2) + (mac.at(-2) === "A" ? "B" : "A") + mac.at(-1);
    expect(await verifyInspectionToken(SECRET, `svci.${body}.${flipped}`, NOW)).toBeUndefined();
  });

  it("are refused in any other shape", async () => {
    const token = await mint();
    for (const bad of ["", "svci.", "svci.e30", "svci.e30.AAAA", "svci.%%%.###", `${token}.extra`, token.slice("svci.".length), `Svci.${token.slice(5)}`]) {
      expect(await verifyInspectionToken(SECRET, bad, NOW), bad).toBeUndefined();
    }
    expect(isInspectionToken("a-configured-bearer-token")).toBe(false);
  });
});
