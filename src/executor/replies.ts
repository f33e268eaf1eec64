/** Parsing an executor's Reply, from an HTTP body or an RPC text message (the same strict contract). */
import { parseBody } from "../http/body.ts";
import { ReplySchema, type Reply } from "../shared/executor-protocol.ts";
import { ID_PATTERN } from "../shared/ids.ts";

export function parseReply(text: string): Reply {
  return parseBody(text, ReplySchema);
}

/** The call a malformed reply meant, when it says so: the error names it. */
export function callIdOf(text: string): string | undefined {
  try {
    const id = (JSON.parse(text) as { call_id?: unknown }).call_id;
    return typeof id === "string" && ID_PATTERN.test(id) ? id : undefined;
  } catch {
    return undefined;
  }
}
