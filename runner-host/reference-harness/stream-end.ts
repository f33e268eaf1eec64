/**
 * A Chat Completions stream counts as finished only when a choice said why it finished. pi-ai
 * starts every reply as `stop` and the OpenAI SDK ends quietly when the event stream does, so a
 * stream cut short (a proxy closing the connection cleanly, a server dying between chunks) would
 * be recorded as a whole, completed reply. This fetch wrapper watches such streams for a non-null
 * `finish_reason` and, at an end without one, fails the body: the SDK then throws, pi records a
 * provider error, and the turn ends `provider_error` as for a connection cut mid-chunk.
 *
 * Only answers to `…/chat/completions` are watched (other APIs end their streams with an event
 * pi-ai checks itself), and a 200 there that is no event stream fails the same way. The scan decodes each chunk once and stops looking
 * once the reason was seen.
 */

/** Characters kept from one chunk for the next, so a `"finish_reason":"` split between two is found. */
const TAIL_CHARS = 64;
const FINISHED = /"finish_reason"\s*:\s*"/;

export const CUT_SHORT = "the provider's stream ended before the reply finished (no finish_reason)";

export function watchedFetch(inner: typeof fetch): typeof fetch {
  return async (input, init) => {
    const res = await inner(input, init);
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    if (!res.ok || !res.body || !new URL(url).pathname.endsWith("/chat/completions")) return res;
    const type = res.headers.get("content-type") ?? "";
    // The harness always asks for a stream: a 200 of anything else (a captive portal's page, a
    // whole JSON reply) would be read as an empty stream, an empty reply.
    const body = type.toLowerCase().startsWith("text/event-stream") ? finishedOrFailed(res.body) : failed(res.body, `the provider answered 200 with ${JSON.stringify(type.slice(0, 64))}, not an event stream`);
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

function failed(body: ReadableStream<Uint8Array>, message: string): ReadableStream<Uint8Array> {
  void body.cancel().catch(() => {}); // nothing of it is read
  return new ReadableStream<Uint8Array>({ start: (controller) => controller.error(new Error(message)) });
}

function finishedOrFailed(body: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let tail = "";
  let finished = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (err) {
        controller.error(err);
        return;
      }
      if (chunk.done) {
        if (finished) controller.close();
        else controller.error(new Error(CUT_SHORT));
        return;
      }
      if (!finished) {
        const text = tail + decoder.decode(chunk.value, { stream: true });
        finished = FINISHED.test(text);
        tail = text.slice(-TAIL_CHARS);
      }
      controller.enqueue(chunk.value);
    },
    cancel: (reason) => reader.cancel(reason),
  });
}
