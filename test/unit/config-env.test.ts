import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { checkEnvironment, usableRunnerSecret } from "../../src/shared/config-env.ts";
import { encryptCredential } from "../../src/session/credentials.ts";
import { parseHostConfig, parseHostConfigText, type HostConfig } from "../../src/shared/config-schema.ts";

const root = fileURLToPath(new URL("../..", import.meta.url));

const T24 = "t".repeat(24);
const key = (bytes: number) => btoa(String.fromCharCode(...new Uint8Array(bytes).map((_, i) => i + 1)));

function config(over: Record<string, unknown> = {}): HostConfig {
  const r = parseHostConfig({
    tokens: [
      { token_env: "TOKEN_A", tenant: "acme", manage: true },
      { token_env: "TOKEN_B", tenant: "acme", read_only: true },
    ],
    harnesses: { pi: { command: ["node", "h.ts"] } },
    ...over,
  });
  if (!r.ok) throw new Error(r.problems.join("\n"));
  return r.config;
}
const goodEnv = () => ({ TOKEN_A: "a".repeat(24), TOKEN_B: "b".repeat(24) });

const tool = { name: "t", description: "d", input_schema: { type: "object" }, url: "https://t.example.com", tenants: ["acme"] };
const r2 = { provider: "r2", bucket: "b", endpoint: "https://r2.example.com", access_key_env: "AK", secret_key_env: "SK", postgres_env: "PG" };

// Token grants: docs/configuration.md "Tokens".
describe("checkEnvironment: token secrets (Authentication 1)", () => {
  it("accepts secrets of at least 24 bytes", () => expect(checkEnvironment(config(), goodEnv())).toEqual([]));
  it("rejects a token variable that is not set", () => {
    expect(checkEnvironment(config(), { TOKEN_A: T24 })).toEqual(["tokens[1].token_env: environment variable TOKEN_B is not set"]);
  });
  it("rejects a secret of 23 bytes and accepts one of 24 bytes counted in UTF-8", () => {
    expect(checkEnvironment(config(), { ...goodEnv(), TOKEN_B: "b".repeat(23) })).toEqual([
      "tokens[1].token_env: environment variable TOKEN_B must hold at least 24 bytes",
    ]);
    expect(checkEnvironment(config(), { ...goodEnv(), TOKEN_B: "é".repeat(12) })).toEqual([]);
    expect(checkEnvironment(config(), { ...goodEnv(), TOKEN_B: "" })).toHaveLength(1);
  });
  it("rejects a secret a bearer token cannot carry: whitespace, a control character, the inspection tokens' svci. prefix", () => {
    const carried = (TOKEN_B: string) => checkEnvironment(config(), { ...goodEnv(), TOKEN_B });
    for (const bad of [`${T24} x`, `${T24}\tx`, `${T24}\u0001`, `${T24}\u007f`, ` ${T24}`, `${T24}\u00a0`]) {
      expect(carried(bad)).toEqual(["tokens[1].token_env: environment variable TOKEN_B holds whitespace or a control character, which a bearer token cannot carry"]);
    }
    expect(carried(`svci.${T24}`)).toEqual(['tokens[1].token_env: environment variable TOKEN_B starts with "svci.", which marks an inspection token']);
    expect(carried(`svc.${T24}~+/=-_`)).toEqual([]);
    const runner = config({ runners: { token_env: "RUNNER" } });
    expect(checkEnvironment(runner, { ...goodEnv(), RUNNER: `${T24} x` })).toEqual([
      "runners.token_env: environment variable RUNNER holds whitespace or a control character, which a bearer token cannot carry",
    ]);
  });
  it("rejects duplicate secret values across entries and names both", () => {
    expect(checkEnvironment(config(), { TOKEN_A: T24, TOKEN_B: T24 })).toEqual([
      "tokens[1].token_env: environment variable TOKEN_B holds the same secret as tokens[0].token_env (TOKEN_A)",
    ]);
  });
  it("rejects two entries naming the same variable as a duplicate secret", () => {
    const c = config({ tokens: [{ token_env: "TOKEN_A", tenant: "a" }, { token_env: "TOKEN_A", tenant: "b" }] });
    expect(checkEnvironment(c, goodEnv())).toEqual([
      "tokens[1].token_env: environment variable TOKEN_A holds the same secret as tokens[0].token_env (TOKEN_A)",
    ]);
  });
});

describe("checkEnvironment: providers, tools and persistence", () => {
  const c = config({ providers: { openai: { api_key_env: "OPENAI_KEY" } } });
  it("requires provider keys set and non-empty", () => {
    expect(checkEnvironment(c, goodEnv())).toEqual(["providers.openai.api_key_env: environment variable OPENAI_KEY is not set"]);
    expect(checkEnvironment(c, { ...goodEnv(), OPENAI_KEY: "" })).toEqual([
      "providers.openai.api_key_env: environment variable OPENAI_KEY is empty",
    ]);
    expect(checkEnvironment(c, { ...goodEnv(), OPENAI_KEY: "k" })).toEqual([]);
  });
  it("requires a tool token_env to be non-empty only when it is set", () => {
    expect(checkEnvironment(config({ tools: [tool] }), goodEnv())).toEqual([]);
    const withToken = config({ tools: [{ ...tool, token_env: "TOOL_TOKEN" }] });
    expect(checkEnvironment(withToken, { ...goodEnv(), TOOL_TOKEN: "" })).toEqual([
      "tools[0].token_env: environment variable TOOL_TOKEN is empty",
    ]);
    expect(checkEnvironment(withToken, { ...goodEnv(), TOOL_TOKEN: "x" })).toEqual([]);
  });
  it("requires persistence postgres_env and access keys non-empty when set", () => {
    const store = config({ persistence: r2 });
    expect(checkEnvironment(store, { ...goodEnv(), AK: "", PG: "" })).toEqual([
      "persistence.postgres_env: environment variable PG is empty",
      "persistence.access_key_env: environment variable AK is empty",
      "persistence.secret_key_env: environment variable SK is not set",
    ]);
    expect(checkEnvironment(store, { ...goodEnv(), AK: "a", SK: "s", PG: "postgres://db" })).toEqual([]);
  });

  it("s3 without keys uses the default credential chain: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set", () => {
    const s3 = config({ persistence: { provider: "s3", bucket: "b" } });
    expect(checkEnvironment(s3, goodEnv())).toEqual([
      "persistence (s3 default credential chain): environment variable AWS_ACCESS_KEY_ID is not set",
      "persistence (s3 default credential chain): environment variable AWS_SECRET_ACCESS_KEY is not set",
    ]);
    expect(checkEnvironment(s3, { ...goodEnv(), AWS_ACCESS_KEY_ID: "a", AWS_SECRET_ACCESS_KEY: "s" })).toEqual([]);
  });

  it("gcs needs a service-account JSON key in GCS_SERVICE_ACCOUNT (unless an emulator is named)", () => {
    const gcs = config({ persistence: { provider: "gcs", bucket: "b" } });
    expect(checkEnvironment(gcs, goodEnv())).toEqual(["persistence (gcs): environment variable GCS_SERVICE_ACCOUNT is not set"]);
    expect(checkEnvironment(gcs, { ...goodEnv(), GCS_SERVICE_ACCOUNT: "{}" })).toEqual([
      "persistence (gcs): environment variable GCS_SERVICE_ACCOUNT lacks client_email, private_key or a valid token_uri",
    ]);
    const account = JSON.stringify({ client_email: "a@b", private_key: "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n" });
    expect(checkEnvironment(gcs, { ...goodEnv(), GCS_SERVICE_ACCOUNT: account })).toEqual([]);
    expect(checkEnvironment(gcs, { ...goodEnv(), STORAGE_EMULATOR_HOST: "http://127.0.0.1:1" })).toEqual([]);
  });
});

// Credential keys: docs/configuration.md "Credential keys".
describe("checkEnvironment: credential keys (Authentication 10)", () => {
  const c = config({ credential_keys: { active: "k2", keys: { k1: "KEY_1", k2: "KEY_2" } } });
  it("accepts base64 of exactly 32 bytes for every configured key", () => {
    expect(checkEnvironment(c, { ...goodEnv(), KEY_1: key(32), KEY_2: key(32) })).toEqual([]);
  });
  it.each([31, 33])("rejects base64 of %i bytes", (n) => {
    expect(checkEnvironment(c, { ...goodEnv(), KEY_1: key(n), KEY_2: key(32) })).toEqual([
      `credential_keys.keys.k1: environment variable KEY_1 must hold base64 of exactly 32 bytes (it decodes to ${n})`,
    ]);
  });
  it("rejects invalid base64, an empty value and a missing variable, retired keys included", () => {
    expect(checkEnvironment(c, { ...goodEnv(), KEY_1: "not base64!" })).toEqual([
      "credential_keys.keys.k1: environment variable KEY_1 is not valid base64",
      "credential_keys.keys.k2: environment variable KEY_2 is not set",
    ]);
    expect(checkEnvironment(c, { ...goodEnv(), KEY_1: "", KEY_2: key(32) })).toEqual([
      "credential_keys.keys.k1: environment variable KEY_1 is empty",
    ]);
  });
});

describe("checkEnvironment: runners secret", () => {
  const c = config({ runners: { token_env: "RUNNER" } });
  it("is not checked when runners is absent", () => expect(checkEnvironment(config(), goodEnv())).toEqual([]));
  it("requires the runner secret set and at least 24 bytes", () => {
    expect(checkEnvironment(c, goodEnv())).toEqual(["runners.token_env: environment variable RUNNER is not set"]);
    expect(checkEnvironment(c, { ...goodEnv(), RUNNER: "r".repeat(23) })).toEqual([
      "runners.token_env: environment variable RUNNER must hold at least 24 bytes",
    ]);
    expect(checkEnvironment(c, { ...goodEnv(), RUNNER: "r".repeat(24) })).toEqual([]);
  });
  it("rejects a runner secret equal to a client token", () => {
    expect(checkEnvironment(c, { ...goodEnv(), RUNNER: "a".repeat(24) })).toEqual([
      "runners.token_env: environment variable RUNNER holds the same secret as tokens[0].token_env (TOKEN_A)",
    ]);
  });
  it("holds the default variable SVC_RUNNER_SECRET to the same rules when runners is absent and it is set", () => {
    expect(checkEnvironment(config(), { ...goodEnv(), SVC_RUNNER_SECRET: "r".repeat(24) })).toEqual([]);
    expect(checkEnvironment(config(), { ...goodEnv(), SVC_RUNNER_SECRET: "r".repeat(23) })).toEqual([
      "runners: environment variable SVC_RUNNER_SECRET must hold at least 24 bytes",
    ]);
    expect(checkEnvironment(config(), { ...goodEnv(), SVC_RUNNER_SECRET: "b".repeat(24) })).toEqual([
      "runners: environment variable SVC_RUNNER_SECRET holds the same secret as tokens[1].token_env (TOKEN_B)",
    ]);
  });
  it("at runtime, trusts a runner secret only when it is at least 24 bytes and no client token's secret", () => {
    expect(usableRunnerSecret(config(), { ...goodEnv(), SVC_RUNNER_SECRET: "r".repeat(24) })).toBe("r".repeat(24));
    expect(usableRunnerSecret(config(), { ...goodEnv(), SVC_RUNNER_SECRET: "r".repeat(23) })).toBeUndefined();
    expect(usableRunnerSecret(config(), { ...goodEnv(), SVC_RUNNER_SECRET: "a".repeat(24) })).toBeUndefined();
    expect(usableRunnerSecret(c, { ...goodEnv(), RUNNER: "a".repeat(24) })).toBeUndefined();
    expect(usableRunnerSecret(c, { ...goodEnv(), RUNNER: "r".repeat(24), SVC_RUNNER_SECRET: "s".repeat(24) })).toBe("r".repeat(24));
  });
});

describe("credential keys at runtime", () => {
  const c = config({ credential_keys: { active: "k1", keys: { k1: "KEY_1" } } });
  const binding = { tenant: "acme", sessionId: "0".repeat(32), alias: "gh" };
  it("encrypts with a key that decodes to exactly 32 bytes (AES-256)", async () => {
    const e = await encryptCredential(c, { KEY_1: key(32) }, binding, "token");
    expect(e).toMatchObject({ alias: "gh", key_id: "k1" });
  });
  it.each([16, 24, 31, 33])("refuses a key that decodes to %i bytes instead of taking it as another AES size", async (n) => {
    await expect(encryptCredential(c, { KEY_1: key(n) }, binding, "token")).rejects.toThrow(/exactly 32 bytes/);
  });
});

describe("checkEnvironment: secrecy", () => {
  it("never puts a secret value into a problem message", () => {
    const c = config({
      tokens: [
        { token_env: "T1", tenant: "a" },
        { token_env: "T2", tenant: "a" },
        { token_env: "T3", tenant: "a" },
      ],
      credential_keys: { active: "k", keys: { k: "AES" } },
      runners: { token_env: "RUNNER" },
    });
    const env = {
      T1: "SECRET-short",
      T2: "SECRET-duplicated-value-0001",
      T3: "SECRET-duplicated-value-0001",
      AES: btoa("SECRET-key-that-is-too-short"),
      RUNNER: "SECRET-duplicated-value-0001",
    };
    const problems = checkEnvironment(c, env);
    expect(problems).toHaveLength(4);
    for (const p of problems) {
      for (const value of Object.values(env)) expect(p).not.toContain(value);
      expect(p).not.toContain("SECRET");
    }
  });
});

describe("examples/local.json", () => {
  it("parses and passes checkEnvironment with the variables from examples/local.env", () => {
    const parsed = parseHostConfigText(readFileSync(`${root}/examples/local.json`, "utf8"));
    if (!parsed.ok) throw new Error(parsed.problems.join("\n"));
    const env: Record<string, string> = {};
    for (const line of readFileSync(`${root}/examples/local.env`, "utf8").split("\n")) {
      const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(line);
      if (m) env[m[1]!] = m[2]!;
    }
    expect(checkEnvironment(parsed.config, env)).toEqual([]);
    expect(parsed.config.runners).toEqual({ token_env: "SVC_RUNNER_SECRET", regions: {} });
    expect(parsed.config.tokens.map((t) => [t.tenant, t.manage, t.read_only])).toEqual([
      ["demo", true, false],
      ["demo", false, true],
    ]);
  });
});
