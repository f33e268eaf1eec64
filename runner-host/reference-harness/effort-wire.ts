/**
 * Whether a reasoning effort reaches the provider at all. pi-ai's catalog lists every level for some
 * models whose transport then sends no effort parameter (pi 0.73.1: xAI's and Moonshot's models,
 * GitHub Copilot's Gemini and Grok, Bedrock's non-Anthropic models): the request for `high` is the
 * request for no effort, and the model reasons at its provider's default — a silent downgrade,
 * which the service never makes (docs/api.md "Sessions"). Which transports take the parameter is
 * pi's private per-provider rule, so pi is asked: its own request builder makes the request
 * (`onPayload` sees it and stops it before any network call), once with the level and once
 * without, and identical requests mean the level is not sent. One pair per model and level per process (cached).
 */
import { streamSimple, type Api, type Model, type ThinkingLevel as WireLevel } from "@mariozechner/pi-ai";
import type { ThinkingLevel } from "@mariozechner/pi-agent-core";

const cache = new Map<string, Promise<boolean | undefined>>();

/** Thrown inside `onPayload` so the built request never leaves the process. */
const STOP = new Error("dry request: stopped before sending");

/**
 * True when the request for `level` differs from the request without an effort, false when it is
 * the same; undefined when pi stops before building a request (a transport that needs ambient
 * credentials or environment first), so nothing can be told and the catalog is trusted.
 */
export function effortReachesWire(model: Model<Api>, level: ThinkingLevel): Promise<boolean | undefined> {
  if (level === "off" || !model.reasoning) return Promise.resolve(true);
  const key = JSON.stringify([model.api, model.provider, model.id, model.baseUrl, model.compat ?? null, model.thinkingLevelMap ?? null, level]);
  let known = cache.get(key);
  if (!known) {
    known = Promise.all([dryRequest(model, level), dryRequest(model, undefined)]).then(([withLevel, without]) =>
      withLevel === undefined || without === undefined ? undefined : withLevel !== without,
    );
    cache.set(key, known);
  }
  return known;
}

/** The request pi would send, as JSON text, or undefined when pi fails before building one. */
async function dryRequest(model: Model<Api>, level: WireLevel | undefined): Promise<string | undefined> {
  let body: string | undefined;
  const stream = streamSimple(model, { messages: [{ role: "user", content: "effort check", timestamp: 0 }] }, {
    apiKey: "dry-request",
    reasoning: level,
    onPayload: (payload) => {
      body = JSON.stringify(payload);
      throw STOP;
    },
  });
  for await (const _ of stream); // ends with the error event STOP makes
  return body;
}
