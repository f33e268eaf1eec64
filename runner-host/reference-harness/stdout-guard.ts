/**
 * Stdout guard: stdout carries `svc-harness/1` lines only (docs/harness-protocol.md). Anything else a
 * library writes to stdout (console.log, a stray process.stdout.write) is diverted to stderr,
 * which the runner-host re-logs. main.ts imports it before it loads anything else (./serve.ts and
 * every library), so it is in place before any library module runs.
 */
const stdout = process.stdout;
const protocolWrite = stdout.write.bind(stdout) as (chunk: string, cb?: (err?: Error | null) => void) => boolean;

stdout.write = ((...args: Parameters<typeof process.stderr.write>) =>
  process.stderr.write(...args)) as typeof stdout.write;

// A broken stdout means the runner-host is gone: nothing more can be said to anyone.
stdout.on("error", () => process.exit(1));

/** Writes protocol text to the real stdout. */
export function writeProtocol(text: string): void {
  protocolWrite(text);
}

/** Exits once everything written so far has been handed to the pipe. */
export function flushAndExit(code: number): void {
  protocolWrite("", () => process.exit(code));
}
