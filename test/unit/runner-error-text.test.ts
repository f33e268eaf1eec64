/**
 * Tenant-visible error text (`session.error.message`, through `turn_end` / `open_failed`) is the
 * service's own words plus a redacted, bounded provider or harness message; the harness's stderr
 * (a process other sessions share) goes to logs only.
 */
import { afterEach, describe, expect, it } from "vitest";
import { bounded, foreign, FOREIGN_TEXT_BYTES, redact, redactValues, TENANT_MESSAGE_BYTES } from "../../runner-host/error-text.ts";
import { inlineHarness } from "./harness-helpers.ts";
import { exitMessage } from "../../runner-host/pooled-process.ts";
import { opened, Rig, turnEnd } from "./runner-setup.ts";

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.stop();
  rig = undefined;
});

const SECRETS = {
  openaiKey: "sk-proj-Ab12Cd34Ef56Gh78Ij90Kl12Mn34",
  urlPassword: "hunter2pass",
  bearer: "tok_9f8e7d6c5b4a39281706",
  jwt: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
  queryToken: "qs-secret-value-77",
  longToken: "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
};

describe("redact, bounded, foreign", () => {
  it("removes keys, URL credentials, bearer tokens, JWTs, secret query values and long tokens; keeps ordinary words", () => {
    const text = [
      `Incorrect API key provided: ${SECRETS.openaiKey}.`,
      `See https://admin:${SECRETS.urlPassword}@api.example.com/v1?token=${SECRETS.queryToken}&model=gpt-4o`,
      `Authorization: Bearer ${SECRETS.bearer}`,
      `jwt ${SECRETS.jwt}`,
      `id ${SECRETS.longToken}`,
      "model claude-3-7-sonnet-20250219 does not support effort max",
    ].join(" | ");
    const out = redact(text);
    for (const s of Object.values(SECRETS)) expect(out).not.toContain(s);
    expect(out).toContain("Incorrect API key provided");
    expect(out).toContain("api.example.com/v1");
    expect(out).toContain("model=gpt-4o");
    expect(out).toContain("claude-3-7-sonnet-20250219 does not support effort max");
  });

  it("removes exact values it is given", () => {
    expect(redact("your key abc-123-xyz was rejected", ["abc-123-xyz"])).toBe("your key [redacted] was rejected");
  });

  it("redactValues removes exact values from every string of a JSON value, and nothing else", () => {
    const key = "k-0123456789";
    const value = { role: "assistant", errorMessage: `401 for key ${key}`, content: [{ type: "text", text: "token: keep me" }], [key]: [key, 3, null] };
    expect(redactValues(value, [key])).toEqual({
      role: "assistant",
      errorMessage: "401 for key [redacted]",
      content: [{ type: "text", text: "token: keep me" }], // no pattern rules here: ordinary text stays
      "[redacted]": ["[redacted]", 3, null],
    });
    // Nothing to remove: the value itself comes back, not a copy; and only the parts that changed
    // are copied (the original is left as it was, the keys keep their order).
    expect(redactValues(value, ["absent-value"])).toBe(value);
    const out = redactValues(value, [key]);
    expect(out.content).toBe(value.content);
    expect(Object.keys(out)).toEqual(["role", "errorMessage", "content", "[redacted]"]);
    expect(value[key]).toEqual([key, 3, null]);
    const list = ["a", "b", `x ${key}`, "c"];
    expect(redactValues(list, [key])).toEqual(["a", "b", "x [redacted]", "c"]);
    expect(list[2]).toBe(`x ${key}`);
  });

  it("a value inside another is no help to the longer one: both are removed whole, whatever their order", () => {
    const headers = ["acme", "acme.Pa55w0rd!"];
    const echoed = { "x-other": "acme", "x-api-key": "acme.Pa55w0rd!", text: "key acme.Pa55w0rd! of acme" };
    const whole = { "x-other": "[redacted]", "x-api-key": "[redacted]", text: "key [redacted] of [redacted]" };
    expect(redactValues(echoed, headers)).toEqual(whole);
    expect(redactValues(echoed, [...headers].reverse())).toEqual(whole);
    expect(redact("401: acme.Pa55w0rd! refused", headers)).toBe("401: [redacted] refused");
  });

  it("bounds by UTF-8 bytes on a character boundary", () => {
    expect(bounded("short", 10)).toBe("short");
    const cut = bounded("é".repeat(600), FOREIGN_TEXT_BYTES);
    expect(Buffer.byteLength(cut)).toBeLessThanOrEqual(FOREIGN_TEXT_BYTES);
    expect(cut.endsWith("é…")).toBe(true);
    expect(Buffer.byteLength(foreign(`line one\nline two ${"x ".repeat(5000)}`))).toBeLessThanOrEqual(FOREIGN_TEXT_BYTES);
    expect(foreign("a\nb\r\nc")).toBe("a b c");
  });
});

describe("how a harness process ended, in the words its other sessions' turns fail with", () => {
  it("says the runner-host stopped it, and why, rather than that it crashed", () => {
    expect(exitMessage({ code: null, signal: "SIGTERM", reason: "killed", message: "did not end an interrupted turn within 10000 ms" })).toBe(
      "the harness process was stopped by the runner-host: did not end an interrupted turn within 10000 ms",
    );
    expect(exitMessage({ code: 3, signal: null, reason: "exited", message: "the harness exited" })).toBe("the harness process crashed (exit code 3)");
    expect(exitMessage({ code: 0, signal: null, reason: "exited", message: "the harness exited" })).toBe("the harness process exited (exit code 0) while its sessions needed it");
  });
});

describe("error text from a provider and from a harness", () => {
  it("a provider error body quoting a key and a URL with a password: own words, redacted, bounded", async () => {
    rig = await Rig.start();
    const fake = await rig.open("err-provider");
    await opened(fake);
    const body = `Incorrect API key provided: ${SECRETS.openaiKey}; retry at https://u:${SECRETS.urlPassword}@example.com ${"padding ".repeat(200)}`;
    const turn = rig.run(fake, `[[error 401 ${body}]]`);
    const end = await turnEnd(fake, turn);
    // The status the session takes for a provider failure (docs/api.md "Turns").
    expect(end).toMatchObject({ status: "interrupted", error: { code: "provider_error" } });
    const message = end.error!.message;
    expect(message.startsWith("the model provider failed: ")).toBe(true);
    expect(message).toContain("Incorrect API key provided");
    expect(message).not.toContain(SECRETS.openaiKey);
    expect(message).not.toContain(SECRETS.urlPassword);
    expect(Buffer.byteLength(message)).toBeLessThanOrEqual(TENANT_MESSAGE_BYTES);
    expect(Buffer.byteLength(message.slice("the model provider failed: ".length))).toBeLessThanOrEqual(FOREIGN_TEXT_BYTES);
  });

  it("the harness's stderr never reaches the tenant: a crash after writing to stderr is logged, not quoted", async () => {
    rig = await Rig.start({ harness: { command: STDERR_CRASH_HARNESS } });
    const fake = await rig.open("err-stderr");
    await opened(fake);
    const turn = rig.run(fake, "anything");
    const end = await turnEnd(fake, turn);
    expect(end).toMatchObject({ status: "failed", error: { code: "service_error" } });
    expect(end.error!.message).toMatch(/harness process crashed \(exit code 3\)/);
    expect(end.error!.message).not.toContain("other-tenant-data");
    const logged = await rig.logs.find((l) => l.msg === "harness stderr" && String(l.fields.line).includes("other-tenant-data"));
    expect(logged.level).toBe("info");
    const exit = await rig.logs.find((l) => l.msg === "harness exited");
    expect(String(exit.fields.stderr_tail)).toContain("other-tenant-data");
  });
});

/** A harness that accepts init and open, and on `run` writes to stderr and exits 3. */
const STDERR_CRASH_HARNESS = inlineHarness("crasher", `process.stderr.write("panic while serving other-tenant-data\\n", () => process.exit(3));`);
