import { getModels } from "@mariozechner/pi-ai";
import { describe, expect, it } from "vitest";
import {
  CommandError,
  resolveEffort,
  resolveModel,
  supportedEfforts,
} from "../../runner-host/reference-harness/model.ts";
import { effortReachesWire } from "../../runner-host/reference-harness/effort-wire.ts";

const catalog = (provider: string, id: string) => {
  const m = getModels(provider as never).find((x) => x.id === id);
  if (!m) throw new Error(`${provider}/${id} missing from the catalog`);
  return m;
};

describe("model resolution from the offline catalog", () => {
  it("applies base_url and api to a copy and leaves the registry object alone", () => {
    const m = resolveModel("openai/gpt-4o-mini", { openai: { key: "k", base_url: "http://127.0.0.1:9/v1/", api: "openai-completions" } });
    expect(m).toMatchObject({ provider: "openai", id: "gpt-4o-mini", baseUrl: "http://127.0.0.1:9/v1", api: "openai-completions" });
    expect(catalog("openai", "gpt-4o-mini")).toMatchObject({ baseUrl: "https://api.openai.com/v1", api: "openai-responses" });
  });

  it("drops compat when the api changes, keeps it otherwise", () => {
    expect(catalog("deepseek", "deepseek-v4-pro").compat).toBeDefined();
    expect(resolveModel("deepseek/deepseek-v4-pro", { deepseek: { key: "k", api: "openai-responses" } }).compat).toBeUndefined();
    expect(resolveModel("deepseek/deepseek-v4-pro", { deepseek: { key: "k", base_url: "http://x/v1" } }).compat).toBeDefined();
    expect(catalog("deepseek", "deepseek-v4-pro").compat).toBeDefined();
  });

  it.each([
    ["an unknown id", "openai/gpt-404"],
    ["an unknown provider", "nosuch/model"],
    ["no slash", "gpt-4o-mini"],
  ])("rejects %s with model_unavailable, never a fallback", (_, ref) => {
    const providers = { openai: { key: "k" }, nosuch: { key: "k" } };
    expect(() => resolveModel(ref, providers)).toThrow(CommandError);
    try {
      resolveModel(ref, providers);
    } catch (err) {
      expect((err as CommandError).code).toBe("model_unavailable");
    }
  });
});

describe("reasoning effort: checked strictly, never clamped", () => {
  it.each([
    ["openai", "gpt-4o-mini", ["off"]],
    ["openai", "gpt-5", ["minimal", "low", "medium", "high"]],
    ["openai", "gpt-5.2", ["minimal", "low", "medium", "high", "xhigh"]],
    // The o-series cannot turn reasoning off and has no minimal (pi's catalog lists both).
    ["openai", "o3-mini", ["low", "medium", "high"]],
    ["openai", "o1", ["low", "medium", "high"]],
    ["azure-openai-responses", "o4-mini", ["low", "medium", "high"]],
    ["openrouter", "openai/o3-mini", ["low", "medium", "high"]],
    ["vercel-ai-gateway", "openai/o3", ["low", "medium", "high"]],
    ["anthropic", "claude-sonnet-4-5", ["off", "minimal", "low", "medium", "high"]],
    // xhigh is sent as the provider's "max": max is available, and xhigh maps upward (allowed).
    ["anthropic", "claude-opus-4-6", ["off", "minimal", "low", "medium", "high", "xhigh", "max"]],
    ["anthropic", "claude-opus-4-7", ["off", "minimal", "low", "medium", "high", "xhigh"]],
    ["deepseek", "deepseek-v4-pro", ["off", "high", "xhigh", "max"]],
    ["google", "gemini-3-pro-preview", ["low", "high"]],
  ])("%s/%s supports exactly %j", (provider, id, efforts) => {
    expect(supportedEfforts(resolveModel(`${provider}/${id}`, { [provider]: { key: "k" } }))).toEqual(efforts);
  });

  it("o-series: off (also when omitted) and minimal are unsupported, not sent as no effort or refused by the API", () => {
    const m = resolveModel("openai/o3-mini", { openai: { key: "k" } });
    expect(() => resolveEffort(m, undefined, "openai/o3-mini")).toThrow('reasoning effort "off" is unsupported by model openai/o3-mini; supported: low, medium, high');
    expect(() => resolveEffort(m, "minimal", "openai/o3-mini")).toThrow(/unsupported/);
    expect(resolveEffort(m, "low", "openai/o3-mini")).toBe("low");
    expect(catalog("openai", "o3-mini").thinkingLevelMap).toBeUndefined(); // the shared catalog entry is untouched
  });

  it("treats omitted and empty as off", () => {
    const m = catalog("openai", "gpt-4o-mini");
    expect(resolveEffort(m, undefined, "openai/gpt-4o-mini")).toBe("off");
    expect(resolveEffort(m, "", "openai/gpt-4o-mini")).toBe("off");
  });

  it("maps max to pi xhigh only where xhigh is the provider's max", () => {
    expect(resolveEffort(catalog("anthropic", "claude-opus-4-6"), "max", "anthropic/claude-opus-4-6")).toBe("xhigh");
    expect(() => resolveEffort(catalog("anthropic", "claude-opus-4-7"), "max", "anthropic/claude-opus-4-7")).toThrow(/unsupported/);
  });

  it("says the effort is unsupported and lists the supported ones", () => {
    expect(() => resolveEffort(catalog("openai", "gpt-5"), undefined, "openai/gpt-5")).toThrow(
      'reasoning effort "off" is unsupported by model openai/gpt-5; supported: minimal, low, medium, high',
    );
    try {
      resolveEffort(catalog("openai", "gpt-4o-mini"), "high", "openai/gpt-4o-mini");
    } catch (err) {
      expect((err as CommandError).code).toBe("effort_unsupported");
    }
  });
});

describe("whether an effort reaches the provider (pi's own request builder, stopped before sending)", () => {
  it.each([
    ["xai", "grok-3-mini", "high", false],
    ["moonshotai", "kimi-k2-thinking", "low", false],
    ["github-copilot", "grok-code-fast-1", "medium", false],
    ["openai", "gpt-5", "low", true],
    ["openrouter", "openai/o3-mini", "high", true],
    ["anthropic", "claude-sonnet-4-5", "high", true],
    ["deepseek", "deepseek-v4-pro", "high", true],
    ["xai", "grok-3-mini", "off", true],
  ] as const)("%s/%s %s: %s", async (provider, id, level, sent) => {
    expect(await effortReachesWire(resolveModel(`${provider}/${id}`, { [provider]: { key: "k" } }), level)).toBe(sent);
  });

  it("cannot tell where pi stops before building a request (ambient credentials), so the catalog is trusted", async () => {
    expect(await effortReachesWire(resolveModel("azure-openai-responses/o4-mini", { "azure-openai-responses": { key: "k" } }), "high")).toBeUndefined();
  });
});
