/**
 * The Node side of the `filesystem` persistence provider: the PERSISTENCE_FS service binding the
 * local stack hands Miniflare. Objects are plain files under `directory` (relative paths resolve
 * from the working directory); a key is a relative path whose segments the Worker URL-encodes.
 *
 * Immutable objects are created atomically: written to a temporary file, then hard-linked into
 * place (the link fails if the name exists, so a re-upload after a crash leaves the first copy),
 * so a reader never sees a partial file. `GET /list?prefix=<key prefix>` answers `{"keys": [...]}`,
 * every object whose key starts with the prefix (temporary files are not objects).
 */
import { randomBytes } from "node:crypto";
import { link, readdir, readFile, rename, unlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { makeDirs } from "./data-dir-usable.ts";

export function persistenceFsHandler(directory: string): (request: Request) => Promise<Response> {
  const root = path.resolve(directory);
  return async (request) => {
    const url = new URL(request.url);
    if (url.pathname === "/list" && request.method === "GET") return list(root, url.searchParams.get("prefix") ?? "");
    if (!url.pathname.startsWith("/o/")) return new Response("no such route", { status: 404 });
    const segments = url.pathname.slice(3).split("/").map(decodeURIComponent);
    if (!segments.every(validSegment)) return new Response("invalid key", { status: 400 });
    const file = path.join(root, ...segments);
    try {
      switch (request.method) {
        case "GET":
          return new Response(await readFile(file));
        case "DELETE":
          await unlink(file).catch((e: NodeJS.ErrnoException) => {
            if (e.code !== "ENOENT") throw e;
          });
          return new Response(null, { status: 204 });
        case "PUT": {
          const body = new Uint8Array(await request.arrayBuffer());
          makeDirs(path.dirname(file)); // a few stat calls: local development only
          const tmp = `${file}.${randomBytes(6).toString("hex")}.tmp`;
          try {
            await writeFile(tmp, body);
            if (request.headers.get("If-None-Match") !== "*") {
              await rename(tmp, file);
              return new Response(null, { status: 201 });
            }
          } catch (e) {
            // A full disk leaves part of the file: nothing else would ever remove it.
            await unlink(tmp).catch(() => {});
            throw e;
          }
          try {
            await link(tmp, file);
            return new Response(null, { status: 201 });
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code === "EEXIST") return new Response(null, { status: 412 });
            throw e;
          } finally {
            await unlink(tmp);
          }
        }
        default:
          return new Response("method not allowed", { status: 405 });
      }
    } catch (e) {
      // Only a read's ENOENT is an absent object; a write's is a directory that cannot be made.
      if ((e as NodeJS.ErrnoException).code === "ENOENT" && request.method !== "PUT") return new Response("not found", { status: 404 });
      return new Response(`filesystem error: ${(e as NodeJS.ErrnoException).code ?? "unknown"}`, { status: 500 });
    }
  };
}

function validSegment(s: string): boolean {
  return !(s === "" || s === "." || s === ".." || s.includes("/") || s.includes("\\") || s.includes("\0"));
}

/** What a create writes first (`<file>.<12 hex>.tmp`) and links into place: never an object. */
const TEMPORARY = /\.[0-9a-f]{12}\.tmp$/;

/** The keys under the prefix's folder that start with the prefix; a missing folder has none. */
async function list(root: string, prefix: string): Promise<Response> {
  const segments = prefix.split("/");
  const last = segments.pop()!;
  if (!segments.every(validSegment) || last.includes("\\") || last.includes("\0")) return new Response("invalid prefix", { status: 400 });
  const folder = path.join(root, ...segments);
  try {
    const entries = await readdir(folder, { recursive: true, withFileTypes: true });
    const keys = entries
      .filter((e) => e.isFile() && !TEMPORARY.test(e.name))
      .map((e) => path.relative(root, path.join(e.parentPath, e.name)).split(path.sep).join("/"))
      .filter((k) => k.startsWith(prefix));
    return Response.json({ keys });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return Response.json({ keys: [] });
    return new Response(`filesystem error: ${(e as NodeJS.ErrnoException).code ?? "unknown"}`, { status: 500 });
  }
}
