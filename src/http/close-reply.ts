/**
 * The Close frame a WebSocket's peer is owed when it closed first (RFC 6455 §5.5.1: the endpoint
 * answers with a Close frame, usually echoing the status code). The runtime sends one by itself
 * only for sockets taken with `accept()` (compatibility flag `web_socket_auto_reply_to_close`);
 * for the hibernatable sockets our objects take, none came locally and the peer saw `1006` when
 * the runtime dropped the connection ~10 s later. Called from each object's `webSocketClose`.
 */

/** Codes that may be sent in a Close frame (RFC 6455 §7.4: 1004–1006 and 1015 are reserved). */
function sendable(code: number): boolean {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
}

/** Answers the peer's Close frame with its own code (`1000` when it gave none we may send). */
export function answerClose(ws: WebSocket, code: number, reason = ""): void {
  try {
    ws.close(sendable(code) ? code : 1000, reason);
  } catch {
    // Closed already (the runtime answered, or the connection is gone): nothing is owed.
  }
}
