/**
 * Model and reasoning-effort resolution for the reference harness.
 *
 * - The model comes from pi-ai's offline catalog and nowhere else: an unknown id is
 *   `model_unavailable`, never a substitute (docs/configuration.md "Providers").
 * - `base_url`/`api` overrides go on a COPY: `getModels()` hands out the shared registry objects.
 * - pi-ai clamps unsupported thinking levels silently, so the effort is checked here first and
 *   rejected with `effort_unsupported` (docs/harness-protocol.md "The reference harness").
 */
import { getModels, getProviders, getSupportedThinkingLevels, type Api, type Model } from "@mariozechner/pi-ai";
import type { ThinkingLevel } from "@mariozechner/pi-agent-core";
import type { HarnessErrorCode, ProviderConfig } from "../harness/protocol.ts";
import { REASONING_EFFORTS, type ReasoningEffort } from "../../src/shared/api-schema.ts";

/** A command failure that becomes `{ok:false, error:{code, message}}`. */
export class CommandError extends Error {
  readonly code: HarnessErrorCode;
  constructor(code: HarnessErrorCode, message: string) {
    super(message);
    this.code = code;
  }
}

/**
 * Transports a provider's `api` may be switched to. Others need ambient credentials or extra
 * environment (AWS chain, Vertex ADC, Azure variables) that a stripped environment lacks.
 */
export const OVERRIDABLE_APIS: readonly string[] = [
  "openai-completions",
  "openai-responses",
  "anthropic-messages",
  "google-generative-ai",
  "mistral-conversations",
];

/** pi levels, lowest first. pi 0.73.1 has no `max`; see `resolveEffort`. */
const PI_LEVELS: readonly string[] = ["off", "minimal", "low", "medium", "high", "xhigh"];

/**
 * OpenAI's o-series (o1, o3, o4-mini, …, under any provider that serves them) take
 * `reasoning_effort` low, medium or high only: reasoning cannot be turned off, and `minimal` is
 * GPT-5's. pi-ai 0.73.1's catalog lists every level for them, so `off` would be sent as no effort
 * (the model reasons at its default, unasked) and `minimal` refused by the API as a provider error.
 */
const O_SERIES = /^o[1-9](?:$|-)/;

export function splitModelRef(ref: string): { prefix: string; id: string } {
  const slash = ref.indexOf("/");
  if (slash <= 0 || slash === ref.length - 1) {
    throw new CommandError("model_unavailable", `model "${ref}" is not in provider/model form`);
  }
  return { prefix: ref.slice(0, slash), id: ref.slice(slash + 1) };
}

/** Catalog model for `prefix/id` with the provider's transport overrides applied to a copy. */
export function resolveModel(ref: string, providers: Record<string, ProviderConfig>): Model<Api> {
  const { prefix, id } = splitModelRef(ref);
  const config = providers[prefix];
  if (!config) throw new CommandError("model_unavailable", `provider "${prefix}" is not configured`);
  const base = getProviders().includes(prefix as never)
    ? getModels(prefix as never).find((m) => m.id === id)
    : undefined;
  if (!base) {
    throw new CommandError("model_unavailable", `model "${ref}" is not in the offline catalog`);
  }
  const model: Model<Api> = { ...base };
  // The last segment: routers name them `openai/o3-mini` (openrouter, vercel-ai-gateway).
  if (O_SERIES.test(id.slice(id.lastIndexOf("/") + 1)) && model.reasoning) {
    model.thinkingLevelMap = { ...model.thinkingLevelMap, off: null, minimal: null };
  }
  if (config.base_url) model.baseUrl = config.base_url.replace(/\/+$/, "");
  if (config.api && config.api !== base.api) {
    model.api = config.api;
    delete model.compat; // compat flags are typed per API and would mislead the new transport
  }
  return model;
}

/**
 * The pi thinking level for a reasoning effort, or `effort_unsupported`. Omitted or empty is `off`.
 * - A level pi does not list for the model is unsupported (pi would clamp it).
 * - A level whose wire value names a LOWER pi level would be a silent downgrade: unsupported.
 *   Upward mappings (e.g. `minimal` sent as `low`) are allowed.
 * - `max` exists only where pi's `xhigh` is sent as the provider's `"max"`.
 */
export function resolveEffort(model: Model<Api>, effort: string | undefined, ref: string): ThinkingLevel {
  const wanted = effort || "off";
  const level = toPiLevel(model, wanted);
  if (level) return level;
  throw effortUnsupported(wanted, ref, supportedEfforts(model));
}

/** The `effort_unsupported` failure, naming the efforts the model does take. */
export function effortUnsupported(wanted: string, ref: string, supported: readonly string[]): CommandError {
  return new CommandError(
    "effort_unsupported",
    `reasoning effort "${wanted}" is unsupported by model ${ref}; supported: ${supported.join(", ") || "none"}`,
  );
}

/** Reasoning efforts the model accepts under the rules of `resolveEffort`. */
export function supportedEfforts(model: Model<Api>): ReasoningEffort[] {
  return REASONING_EFFORTS.filter((e) => toPiLevel(model, e) !== undefined);
}

function toPiLevel(model: Model<Api>, effort: string): ThinkingLevel | undefined {
  const supported: readonly string[] = getSupportedThinkingLevels(model);
  if (effort === "max") {
    const xhighWire = model.reasoning ? model.thinkingLevelMap?.xhigh : undefined;
    return supported.includes("xhigh") && xhighWire === "max" ? "xhigh" : undefined;
  }
  if (!supported.includes(effort)) return undefined;
  const wire = model.thinkingLevelMap?.[effort as ThinkingLevel];
  const wireRank = typeof wire === "string" ? PI_LEVELS.indexOf(wire.toLowerCase()) : -1;
  if (wireRank !== -1 && wireRank < PI_LEVELS.indexOf(effort)) return undefined;
  return effort as ThinkingLevel;
}
