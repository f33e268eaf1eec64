/**
 * `limits.subscribers` arithmetic (docs/configuration.md "Limits": open SSE streams across the deployment): a
 * tenant's share of the cap, what a holder is granted, and the idle headroom an isolate may keep.
 */
import { describe, expect, it } from "vitest";
import { grant, keepHint, MAX_KEEP } from "../../src/streams/shares.ts";
import { tenantShare } from "../../src/tenant/share.ts";

describe("tenant share of limits.subscribers", () => {
  it("is the whole cap with one tenant, and three quarters (rounded up) with several", () => {
    expect(tenantShare(128, 1)).toBe(128);
    expect(tenantShare(128, 2)).toBe(96);
    expect(tenantShare(8, 5)).toBe(6);
    expect(tenantShare(2, 2)).toBe(2);
    expect(tenantShare(1, 3)).toBe(1);
  });
});

describe("grant", () => {
  const base = { cap: 8, share: 6, need: 0, want: 1, total: 0, ofTenant: 0 };
  it("grants what is wanted while the cap and the tenant's share allow", () => {
    expect(grant({ ...base, want: 4 })).toBe(4);
    expect(grant({ ...base, want: 4, total: 6 })).toBe(2);
    expect(grant({ ...base, want: 4, total: 3, ofTenant: 3 })).toBe(3);
  });
  it("grants nothing new at the cap, or at the tenant's share", () => {
    expect(grant({ ...base, total: 8 })).toBe(0);
    expect(grant({ ...base, total: 6, ofTenant: 6 })).toBe(0);
    expect(grant({ ...base, need: 2, want: 3, total: 8, ofTenant: 2 })).toBe(2);
  });
  it("never records fewer slots than the holder's open streams, even past the cap", () => {
    expect(grant({ ...base, need: 3, want: 4, total: 9, ofTenant: 3 })).toBe(3);
  });
});

describe("keep hint (headroom per isolate)", () => {
  it("is an eighth of what is free, at most MAX_KEEP, and 0 near the cap", () => {
    expect(keepHint(1_000_000, 0)).toBe(MAX_KEEP);
    expect(keepHint(128, 0)).toBe(MAX_KEEP);
    expect(keepHint(128, 100)).toBe(3);
    expect(keepHint(128, 121)).toBe(0);
    expect(keepHint(8, 0)).toBe(1);
    expect(keepHint(8, 1)).toBe(0);
    expect(keepHint(8, 9)).toBe(0);
  });
});
