/**
 * The Cloudflare `agents` peer: an `AIChatAgent` Durable Object whose `onChatMessage` streams the
 * scripted provider through the AI SDK (`streamText` + `@ai-sdk/openai-compatible`), as the
 * package's own README shows with another provider. serve.ts bundles this file with esbuild and
 * runs it in Miniflare; clients reach an agent at `/agents/chat-agent/<name>` (WebSocket).
 */
import { AIChatAgent } from "@cloudflare/ai-chat";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { routeAgentRequest } from "agents";
import { convertToModelMessages, streamText } from "ai";

/** This Worker's bindings (serve.ts); the repository's `Cloudflare.Env` types the service's own Worker. */
type Env = { PROVIDER_URL: string; ChatAgent: DurableObjectNamespace };

export class ChatAgent extends AIChatAgent {
  override async onChatMessage() {
    const env = this.env as unknown as Env;
    const provider = createOpenAICompatible({ name: "scripted", baseURL: env.PROVIDER_URL, apiKey: "sk-bench", includeUsage: true });
    const result = streamText({
      model: provider.chatModel("gpt-4o-mini"),
      messages: await convertToModelMessages(this.messages),
      // A failed request is a failed turn: retries would hide a broken provider from the bench.
      maxRetries: 0,
    });
    // The error's own message instead of the SDK's masked "An error occurred.": the bench prints it.
    return result.toUIMessageStreamResponse({ onError: (e) => (e instanceof Error ? `${e.name}: ${e.message}` : String(e)) });
  }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    return (await routeAgentRequest(request, env as unknown as Cloudflare.Env)) ?? new Response("not found", { status: 404 });
  },
};
