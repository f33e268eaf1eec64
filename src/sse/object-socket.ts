/**
 * How the Worker reaches the object end of a stream: a WebSocket upgrade through the object's
 * stub. The object answers `101` with the socket, or an error in the service's error shape, which becomes
 * the client's answer (the stream never starts).
 */
import { ServiceError, type ErrorBody } from "../shared/errors.ts";

/** What a stream needs of the object's socket (Workers' WebSocket fits; tests pass a fake). */
export type SocketLike = {
  accept(): void;
  send(m: string): void;
  close(code?: number, reason?: string): void;
  addEventListener(type: "message", fn: (e: { data: string | ArrayBuffer }) => void): void;
  addEventListener(type: "close" | "error", fn: () => void): void;
};

export type ObjectStub = {
  fetch(input: string, init?: RequestInit): Promise<{ status: number; webSocket?: SocketLike | null; json(): Promise<unknown> }>;
};

/** Upgrades to the object's socket and accepts it; an object that refuses throws its error. */
export async function acceptObjectSocket(stub: ObjectStub, url: string, headers: Record<string, string> = {}): Promise<SocketLike> {
  const res = await stub.fetch(url, { headers: { ...headers, Upgrade: "websocket" } });
  if (res.status !== 101 || !res.webSocket) throw ServiceError.from((await res.json()) as ErrorBody);
  res.webSocket.accept();
  return res.webSocket;
}
