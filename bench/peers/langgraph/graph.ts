/**
 * The LangGraph peer's graph: one node calling a streaming `ChatOpenAI` pointed at the scripted
 * provider (`PROVIDER_URL`, set by serve.ts from its command line). The dev server streams the
 * model's tokens out of the node as `messages` events.
 */
import { END, MessagesAnnotation, START, StateGraph } from "@langchain/langgraph";
import { ChatOpenAI } from "@langchain/openai";

const model = new ChatOpenAI({
  model: "gpt-4o-mini",
  apiKey: "sk-bench",
  streaming: true,
  // A failed request is a failed run: retries would hide a broken provider from the bench.
  maxRetries: 0,
  configuration: { baseURL: process.env.PROVIDER_URL },
});

async function callModel(state: typeof MessagesAnnotation.State) {
  return { messages: [await model.invoke(state.messages)] };
}

export const graph = new StateGraph(MessagesAnnotation).addNode("model", callModel).addEdge(START, "model").addEdge("model", END).compile();
