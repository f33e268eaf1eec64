import { describe, expect, it } from "vitest";
import {
  MAX_CONFIG_BYTES,
  parseHostConfig,
  parseHostConfigText,
  parseListen,
  type HostConfig,
} from "../../src/shared/config-schema.ts";
import { WORKER_BINDINGS } from "../../src/shared/worker-bindings.ts";

type Json = Record<string, unknown>;

const base = (): Json => ({
  tokens: [{ token_env: "SVC_TOKEN", tenant: "acme" }],
  harnesses: { pi: { command: ["node", "harness.ts"] } },
});
const tool = (over: Json = {}): Json => ({
  name: "search",
  description: "Searches the web",
  input_schema: { type: "object", properties: { q: { type: "string" } } },
  url: "https://tools.example.com/search",
  tenants: ["acme"],
  ...over,
});
const with_ = (over: Json): Json => ({ ...base(), ...over });
const withHarness = (over: Json) => with_({ harnesses: { pi: { command: ["node", "harness.ts"], ...over } } });
const withToken = (over: Json) => with_({ tokens: [{ token_env: "SVC_TOKEN", tenant: "acme", ...over }] });
const withLimits = (limits: Json) => with_({ limits });
const withTool = (over: Json = {}) => with_({ tools: [tool(over)] });
const withProvider = (over: Json) => with_({ providers: { openai: { api_key_env: "KEY", ...over } } });
const withStore = (persistence: Json) => with_({ persistence });

function ok(value: Json): HostConfig {
  const r = parseHostConfig(value);
  if (!r.ok) throw new Error(`expected a valid configuration, got:\n${r.problems.join("\n")}`);
  return r.config;
}
function problems(value: unknown): string[] {
  const r = parseHostConfig(value);
  if (r.ok) throw new Error("expected the configuration to be rejected");
  return r.problems;
}
/** Rejected with exactly this problem among the reported ones. */
function rejects(value: Json, problem: string | RegExp) {
  const list = problems(value);
  if (typeof problem === "string") expect(list).toContain(problem);
  else expect(list.some((p) => problem.test(p)), list.join("\n")).toBe(true);
}

describe("host configuration file: defaults", () => {
  it("applies the documented defaults when optional fields are omitted", () => {
    const c = ok(base());
    expect(c.listen).toBe("127.0.0.1:8080");
    expect(c.public_url).toBe("http://127.0.0.1:8080");
    expect(c.data_dir).toBe(".svc");
    expect(c.providers).toEqual({});
    expect(c.tools).toEqual([]);
    expect(c.persistence).toBeNull();
    expect(c.credential_keys).toBeNull();
    expect(c.runners).toBeNull();
    expect(c.limits).toEqual({
      active: 16,
      loaded: 1024,
      queue: 16,
      input_bytes: 65536,
      session_bytes: 1073741824,
      subscribers: 128,
      subscriber_events: 128,
      subscriber_bytes: 2097152,
    });
    expect(c.tokens[0]).toEqual({ token_env: "SVC_TOKEN", tenant: "acme", session: "", manage: false, read_only: false });
    expect(c.harnesses.pi).toEqual({
      command: ["node", "harness.ts"],
      max_shared: 8,
      max_active_turns: 8,
      max_hosts: 16,
      max_starting: 4,
      spares: 1,
    });
  });
});

describe("host configuration file: top level", () => {
  it("requires a non-empty tokens list", () => {
    rejects({ harnesses: base().harnesses }, "tokens: is required");
    rejects(with_({ tokens: [] }), "tokens: must list at least one token");
  });
  it("requires at least one harness", () => {
    rejects({ tokens: base().tokens }, "harnesses: is required");
    rejects(with_({ harnesses: {} }), "harnesses: must configure at least one harness");
  });
  it.each(["127.0.0.1:0", "127.0.0.1:65535", "[::1]:8080", "[fe80::1%eth0]:9000", "localhost:80", "0.0.0.0:8080"])(
    "accepts listen %s (TCP host:port)",
    (listen) => expect(ok(with_({ listen })).listen).toBe(listen),
  );
  it.each(["127.0.0.1:65536", "127.0.0.1", "::1:8080", ":8080", "127.0.0.1:-1", "host:80x", "[::1]", "[127.0.0.1]:80", ""])(
    "rejects listen %j",
    (listen) => rejects(with_({ listen }), /^listen: must be host:port/),
  );
  it("splits listen into host and port, IPv6 without brackets", () => {
    expect(parseListen("[::1]:8080")).toEqual({ host: "::1", port: 8080 });
    expect(parseListen("127.0.0.1:0")).toEqual({ host: "127.0.0.1", port: 0 });
  });
  it("accepts an https public_url at the root or under a path (a base URL), with or without the trailing slash", () => {
    expect(ok(with_({ public_url: "https://svc.example.com" })).public_url).toBe("https://svc.example.com");
    expect(ok(with_({ public_url: "https://svc.example.com/" })).public_url).toBe("https://svc.example.com/");
    expect(ok(with_({ public_url: "https://svc.example.com/agents" })).public_url).toBe("https://svc.example.com/agents");
    expect(ok(with_({ public_url: "http://127.0.0.1:8080/some/prefix/" })).public_url).toBe("http://127.0.0.1:8080/some/prefix/");
  });
  it.each([
    ["ftp://svc.example.com", "must be an http:// or https:// URL"],
    ["127.0.0.1:8080", "must be an http:// or https:// URL"],
    ["http://user:pw@svc.example.com", "must not contain credentials"],
    ["http://@svc.example.com", "must not contain credentials"],
    ["http://svc.example.com/?a=1", "must not have a query"],
    ["http://svc.example.com/?", "must not have a query"],
    ["http://svc.example.com/#top", "must not have a fragment"],
  ])("rejects public_url %s", (public_url, why) => rejects(with_({ public_url }), `public_url: ${why}`));
  it("rejects an empty data_dir", () => rejects(with_({ data_dir: "" }), "data_dir: must not be empty"));
});

// Token grants: docs/configuration.md "Tokens".
describe("host configuration file: tokens (Authentication 1)", () => {
  const tokens = (tenant: string) => [
    { token_env: "A", tenant: "a" },
    { token_env: "B", tenant: "b" },
    { token_env: "C", tenant },
  ];
  it("accepts a tenant of 128 bytes in multibyte characters and rejects 129 bytes", () => {
    const t128 = "é".repeat(64); // 64 characters, 128 UTF-8 bytes
    expect(ok(with_({ tokens: tokens(t128) })).tokens[2]!.tenant).toBe(t128);
    rejects(with_({ tokens: tokens(`${t128}a`) }), "tokens[2].tenant: must be 1 to 128 bytes");
  });
  it("rejects an empty tenant", () => rejects(with_({ tokens: tokens("") }), "tokens[2].tenant: must be 1 to 128 bytes"));
  it("requires token_env to name a variable", () => {
    rejects(withToken({ token_env: "" }), "tokens[0].token_env: must name an environment variable");
    rejects(with_({ tokens: [{ tenant: "acme" }] }), "tokens[0].token_env: is required");
  });
  it("accepts a 32-hex session and stores it in lowercase", () => {
    expect(ok(withToken({ session: "ABCDEF0123456789abcdef0123456789" })).tokens[0]!.session).toBe(
      "abcdef0123456789abcdef0123456789",
    );
  });
  it.each(["abcdef0123456789abcdef012345678", "abcdef0123456789abcdef01234567890", "zbcdef0123456789abcdef0123456789"])(
    "rejects session %s that is not 32 hex characters",
    (session) => rejects(withToken({ session }), "tokens[0].session: must be a 32-character hexadecimal session id"),
  );
  it("rejects manage and read_only that are not booleans", () => {
    rejects(withToken({ manage: "yes" }), "tokens[0].manage: must be true or false, not a string");
    rejects(withToken({ read_only: 1 }), "tokens[0].read_only: must be true or false, not an integer");
  });
});

describe("host configuration file: harnesses (Runner)", () => {
  it("accepts a harness name of 64 characters and rejects 65", () => {
    const n64 = "h".repeat(64);
    expect(Object.keys(ok(with_({ harnesses: { [n64]: { command: ["x"] } } })).harnesses)).toEqual([n64]);
    rejects(with_({ harnesses: { [`${n64}h`]: { command: ["x"] } } }), `harnesses.${n64}h: name must be 1 to 64 characters`);
  });
  it("counts a harness name in characters, not bytes", () => {
    ok(with_({ harnesses: { ["é".repeat(64)]: { command: ["x"] } } }));
  });
  it("rejects an empty harness name", () => {
    rejects(with_({ harnesses: { "": { command: ["x"] } } }), 'harnesses[""]: name must be 1 to 64 characters');
  });
  it("requires a non-empty command with a non-empty command[0]", () => {
    rejects(withHarness({ command: [] }), "harnesses.pi.command: must list the program to run and its arguments");
    rejects(withHarness({ command: [""] }), "harnesses.pi.command[0]: must not be empty (it is the program to run)");
    expect(ok(withHarness({ command: ["node", ""] })).harnesses.pi!.command).toEqual(["node", ""]);
  });
  it.each([1, 1024])("accepts max_shared %i", (max_shared) => expect(ok(withHarness({ max_shared })).harnesses.pi!.max_shared).toBe(max_shared));
  it.each([0, 1025])("rejects max_shared %i", (max_shared) =>
    rejects(withHarness({ max_shared }), "harnesses.pi.max_shared: must be between 1 and 1024"),
  );
  it("defaults max_active_turns to max_shared", () => {
    expect(ok(withHarness({ max_shared: 3 })).harnesses.pi!.max_active_turns).toBe(3);
  });
  it("accepts max_active_turns from 1 to max_shared", () => {
    expect(ok(withHarness({ max_active_turns: 1 })).harnesses.pi!.max_active_turns).toBe(1);
    expect(ok(withHarness({ max_active_turns: 8 })).harnesses.pi!.max_active_turns).toBe(8);
  });
  it("rejects max_active_turns above max_shared or below 1", () => {
    rejects(withHarness({ max_active_turns: 9 }), "harnesses.pi.max_active_turns: must be between 1 and max_shared (8)");
    rejects(withHarness({ max_shared: 4, max_active_turns: 5 }), "harnesses.pi.max_active_turns: must be between 1 and max_shared (4)");
    rejects(withHarness({ max_active_turns: 0 }), "harnesses.pi.max_active_turns: must be between 1 and max_shared (8)");
  });
  it("accepts max_hosts and max_starting of 1 and rejects 0", () => {
    const h = ok(withHarness({ max_hosts: 1, max_starting: 1 })).harnesses.pi!;
    expect([h.max_hosts, h.max_starting]).toEqual([1, 1]);
    rejects(withHarness({ max_hosts: 0 }), "harnesses.pi.max_hosts: must be at least 1");
    rejects(withHarness({ max_starting: 0 }), "harnesses.pi.max_starting: must be at least 1");
  });
  it("rejects a fractional integer field in plain words", () => {
    rejects(withHarness({ max_shared: 1.5 }), "harnesses.pi.max_shared: must be an integer, not a number");
  });
});

describe("host configuration file: providers", () => {
  it("requires api_key_env", () => rejects(with_({ providers: { openai: {} } }), "providers.openai.api_key_env: is required"));
  it("accepts an http(s) base_url with a host and a path", () => {
    expect(ok(withProvider({ base_url: "http://127.0.0.1:8791/v1" })).providers.openai!.base_url).toBe("http://127.0.0.1:8791/v1");
  });
  it.each([
    ["ftp://api.example.com", "must be an http:// or https:// URL"],
    ["https://key:secret@api.example.com/v1", "must not contain credentials"],
    ["http://", "must be a valid http(s) URL"],
    // WHATWG parsing would take `v1` as the host.
    ["http:///v1", "must be an http(s) URL with a host"],
    ["https:///", "must be a valid http(s) URL"],
  ])("rejects base_url %s", (base_url, why) => rejects(withProvider({ base_url }), `providers.openai.base_url: ${why}`));
  it.each(["openai-completions", "openai-responses", "anthropic-messages", "google-generative-ai", "mistral-conversations"])(
    "accepts api %s",
    (api) => expect(ok(withProvider({ api })).providers.openai!.api).toBe(api),
  );
  it("rejects an api the reference harness does not accept", () => {
    rejects(withProvider({ api: "bedrock-converse-stream" }), /^providers\.openai\.api: must be one of openai-completions, /);
  });
  it("rejects a provider prefix that a provider/model id could never select", () => {
    rejects(with_({ providers: { "a/b": { api_key_env: "K" } } }), 'providers["a/b"]: prefix must be non-empty and must not contain /');
  });
});

describe("host configuration file: limits", () => {
  const edges: [string, number, number][] = [
    // field, smallest accepted, largest rejected below it
    ["active", 1, 0],
    ["queue", 1, 0],
    ["input_bytes", 1, 0],
    ["session_bytes", 16_777_216, 16_777_215],
    ["subscribers", 1, 0],
    ["subscriber_events", 1, 0],
    ["subscriber_bytes", 4096, 4095],
  ];
  it.each(edges)("accepts limits.%s at its minimum %i and rejects %i", (field, min, below) => {
    expect(ok(withLimits({ [field]: min })).limits[field as "active"]).toBe(min);
    rejects(withLimits({ [field]: below }), new RegExp(`^limits\\.${field}: must be (at least|between) ${min}`));
  });
  it.each([
    ["queue", 1024],
    ["input_bytes", 1_048_576],
  ] as const)("accepts limits.%s up to %i and rejects one more", (field, max) => {
    expect(ok(withLimits({ [field]: max })).limits[field]).toBe(max);
    rejects(withLimits({ [field]: max + 1 }), `limits.${field}: must be between 1 and ${max}`);
  });
  it("accepts loaded equal to active and rejects loaded below active", () => {
    expect(ok(withLimits({ active: 20, loaded: 20 })).limits.loaded).toBe(20);
    rejects(withLimits({ active: 20, loaded: 19 }), "limits.loaded: must be at least limits.active (20)");
  });
  it("validates limits together: the default loaded is checked against a larger active", () => {
    rejects(withLimits({ active: 2000 }), "limits.loaded: must be at least limits.active (2000)");
  });
  it("rejects a limit of the wrong type in plain words", () => {
    rejects(withLimits({ queue: "16" }), "limits.queue: must be an integer, not a string");
  });
});

describe("host configuration file: tool bindings", () => {
  it("applies the tool defaults and resolves the transport to http", () => {
    const t = ok(withTool()).tools[0]!;
    expect(t).toMatchObject({ output_schema: null, token_env: "", transport: "http", mcp_tool: "" });
    expect(t).toMatchObject({ timeout_seconds: 300, max_output_bytes: 1_048_576, inspect_session: false });
  });
  it.each(["a", `A${"b".repeat(63)}`, "get_weather2"])("accepts tool name %s", (name) => expect(ok(withTool({ name })).tools[0]!.name).toBe(name));
  it.each([`A${"b".repeat(64)}`, "1abc", "_abc", "a-b", ""])("rejects tool name %j", (name) =>
    rejects(withTool({ name }), /^tools\[0\]\.name: must start with a letter/),
  );
  it("rejects a tool name used twice", () => {
    rejects(with_({ tools: [tool(), tool({ url: "https://other.example.com" })] }), 'tools[1].name: "search" is already used by tools[0]');
  });
  it.each(["", "   "])("rejects an empty description %j", (description) =>
    rejects(withTool({ description }), "tools[0].description: must not be empty"),
  );
  it("requires input_schema to be an object JSON Schema", () => {
    rejects(withTool({ input_schema: { type: "string" } }), /^tools\[0\]\.input_schema: must be a JSON Schema with "type": "object"/);
    rejects(withTool({ input_schema: true }), "tools[0].input_schema: must be an object, not true or false");
    rejects(withTool({ input_schema: [] }), "tools[0].input_schema: must be an object, not an array");
    rejects(withTool({ input_schema: undefined }), "tools[0].input_schema: is required");
  });
  it("accepts an object output_schema or null and rejects anything else", () => {
    expect(ok(withTool({ output_schema: { type: "object" } })).tools[0]!.output_schema).toEqual({ type: "object" });
    expect(ok(withTool({ output_schema: null })).tools[0]!.output_schema).toBeNull();
    rejects(withTool({ output_schema: "object" }), "tools[0].output_schema: must be an object, not a string");
  });
  it("accepts tool schemas nesting 64 levels and rejects 65 (the bound of a request body)", () => {
    const schema = (levels: number) => {
      let s: Record<string, unknown> = { type: "object" };
      for (let i = 1; i < levels; i++) s = { type: "object", properties: { a: s } };
      return s;
    };
    // Each wrapper adds two levels (the schema and its `properties`): 63 levels, then 65.
    ok(withTool({ input_schema: schema(32), output_schema: schema(32) }));
    rejects(withTool({ input_schema: schema(33) }), "tools[0].input_schema: nests deeper than 64 levels");
    rejects(withTool({ output_schema: schema(33) }), "tools[0].output_schema: nests deeper than 64 levels");
  });
  it("accepts local $ref pointers", () => {
    const input_schema = { type: "object", properties: { a: { $ref: "#/$defs/a" } }, $defs: { a: { type: "string" } } };
    ok(withTool({ input_schema }));
  });
  it("rejects external $ref URLs anywhere in a schema, nested ones included", () => {
    rejects(
      withTool({ input_schema: { type: "object", $ref: "https://schemas.example.com/x.json" } }),
      'tools[0].input_schema.$ref: external reference "https://schemas.example.com/x.json" is not allowed; only references starting with # are',
    );
    rejects(
      withTool({ input_schema: { type: "object", properties: { a: { type: "array", items: { $ref: "other.json#/a" } } } } }),
      /^tools\[0\]\.input_schema\.properties\.a\.items\.\$ref: external reference "other\.json#\/a"/,
    );
    rejects(withTool({ input_schema: { type: "object", anyOf: [{}, { $ref: "/abs" }] } }), /^tools\[0\]\.input_schema\.anyOf\[1\]\.\$ref: external/);
    rejects(withTool({ output_schema: { $ref: "http://x/y" } }), /^tools\[0\]\.output_schema\.\$ref: external/);
  });
  it("compiles tool schemas at load: a local $ref must resolve", () => {
    ok(withTool({ input_schema: { type: "object", $defs: { n: { $anchor: "num", type: "number" } }, properties: { a: { $ref: "#num" }, b: { $ref: "#" } } } }));
    rejects(
      withTool({ input_schema: { type: "object", properties: { a: { $ref: "#/$defs/missing" } } } }),
      'tools[0].input_schema.properties.a.$ref: "#/$defs/missing" resolves to nothing in this schema',
    );
    rejects(withTool({ output_schema: { $ref: "#/definitions/x" } }), /^tools\[0\]\.output_schema\.\$ref: "#\/definitions\/x" resolves to nothing/);
  });
  it("compiles tool schemas at load: keywords must have the shape a validator reads", () => {
    rejects(withTool({ input_schema: { type: "object", properties: 5 } }), "tools[0].input_schema.properties: must be an object whose values are schemas");
    rejects(withTool({ input_schema: { type: "object", properties: { a: "string" } } }), "tools[0].input_schema.properties.a: must be a schema (an object or a boolean)");
    rejects(withTool({ input_schema: { type: "object", required: "a" } }), "tools[0].input_schema.required: must be an array of strings");
    rejects(withTool({ input_schema: { type: "object", anyOf: {} } }), "tools[0].input_schema.anyOf: must be an array of schemas");
    rejects(withTool({ input_schema: { type: "object", properties: { a: { type: "text" } } } }), /^tools\[0\]\.input_schema\.properties\.a\.type: must name JSON types/);
    rejects(withTool({ input_schema: { type: "object", properties: { a: { pattern: "(" } } } }), "tools[0].input_schema.properties.a.pattern: is not a valid regular expression");
    rejects(withTool({ input_schema: { type: "object", maxProperties: -1 } }), "tools[0].input_schema.maxProperties: must be a non-negative integer");
    // Valid across drafts: draft 4's boolean exclusiveMaximum, array-form items, boolean schemas.
    ok(withTool({ output_schema: { $schema: "http://json-schema.org/draft-04/schema#", type: "number", maximum: 5, exclusiveMaximum: true } }));
    ok(withTool({ input_schema: { type: "object", properties: { t: { type: "array", items: [{ type: "string" }, true] }, u: false } } }));
  });
  it("accepts a url with a query and rejects credentials, fragments and other schemes", () => {
    ok(withTool({ url: "https://tools.example.com/call?v=2" }));
    rejects(withTool({ url: "https://u:p@tools.example.com" }), "tools[0].url: must not contain credentials");
    rejects(withTool({ url: "https://tools.example.com/#x" }), "tools[0].url: must not have a fragment");
    rejects(withTool({ url: "ws://tools.example.com" }), "tools[0].url: must be an http:// or https:// URL");
  });
  it("requires a non-empty tenants list of valid tenants", () => {
    rejects(withTool({ tenants: [] }), "tools[0].tenants: must list at least one tenant");
    rejects(withTool({ tenants: ["acme", ""] }), "tools[0].tenants[1]: must be 1 to 128 bytes");
  });
  it("defaults the transport to mcp when mcp_tool is set", () => {
    expect(ok(withTool({ mcp_tool: "remote_search" })).tools[0]).toMatchObject({ transport: "mcp", mcp_tool: "remote_search" });
  });
  it("calls the remote tool of the same name when transport is mcp without mcp_tool", () => {
    expect(ok(withTool({ transport: "mcp" })).tools[0]).toMatchObject({ transport: "mcp", mcp_tool: "search" });
  });
  it("rejects an unknown transport", () => rejects(withTool({ transport: "grpc" }), 'tools[0].transport: must be "http" or "mcp"'));
  it("rejects transport http together with mcp_tool", () => {
    rejects(withTool({ transport: "http", mcp_tool: "x" }), 'tools[0].transport: "http" cannot be combined with mcp_tool');
  });
  it("accepts timeout_seconds 1 and 86400 and rejects 0 and 86401", () => {
    expect(ok(withTool({ timeout_seconds: 1 })).tools[0]!.timeout_seconds).toBe(1);
    expect(ok(withTool({ timeout_seconds: 86400 })).tools[0]!.timeout_seconds).toBe(86400);
    rejects(withTool({ timeout_seconds: 0 }), "tools[0].timeout_seconds: must be between 1 and 86400");
    rejects(withTool({ timeout_seconds: 86401 }), "tools[0].timeout_seconds: must be between 1 and 86400");
  });
  it("accepts max_output_bytes 1 and 2097152 and rejects 0 and 2097153", () => {
    expect(ok(withTool({ max_output_bytes: 1 })).tools[0]!.max_output_bytes).toBe(1);
    expect(ok(withTool({ max_output_bytes: 2_097_152 })).tools[0]!.max_output_bytes).toBe(2_097_152);
    rejects(withTool({ max_output_bytes: 0 }), "tools[0].max_output_bytes: must be between 1 and 2097152");
    rejects(withTool({ max_output_bytes: 2_097_153 }), "tools[0].max_output_bytes: must be between 1 and 2097152");
  });
  it("accepts inspect_session on an http tool and rejects it with mcp_tool", () => {
    expect(ok(withTool({ inspect_session: true })).tools[0]!.inspect_session).toBe(true);
    rejects(withTool({ inspect_session: true, mcp_tool: "x" }), /^tools\[0\]\.inspect_session: cannot be combined with mcp_tool/);
    rejects(withTool({ inspect_session: true, transport: "mcp" }), /^tools\[0\]\.inspect_session: cannot be combined with mcp_tool/);
  });
});

describe("host configuration file: persistence settings", () => {
  it("is optional and null by default; filesystem needs a directory", () => {
    expect(ok(with_({ persistence: null })).persistence).toBeNull();
    expect(ok(withStore({ provider: "filesystem", directory: "state" })).persistence).toEqual({
      provider: "filesystem",
      directory: "state",
      prefix: "",
      postgres_env: "",
      interval_seconds: 5,
      queue: 128,
    });
    rejects(withStore({ provider: "filesystem" }), 'persistence.directory: is required with provider "filesystem"');
  });
  it("rejects an unknown provider", () => {
    rejects(withStore({ provider: "azure", bucket: "b" }), "persistence.provider: must be one of filesystem, s3, r2, gcs");
  });
  it.each(["s3", "r2", "gcs"])("requires a bucket with %s", (provider) => {
    rejects(withStore({ provider }), `persistence.bucket: is required with provider "${provider}"`);
  });
  const r2 = { provider: "r2", bucket: "b", endpoint: "https://acct.r2.cloudflarestorage.com", access_key_env: "AK", secret_key_env: "SK" };
  it("defaults region to auto for r2 and keeps an explicit one", () => {
    expect(ok(withStore(r2)).persistence!.region).toBe("auto");
    expect(ok(withStore({ ...r2, region: "wnam" })).persistence!.region).toBe("wnam");
    expect(ok(withStore({ provider: "s3", bucket: "b" })).persistence!.region).toBeUndefined();
  });
  it("requires endpoint with r2 and checks it is http(s)", () => {
    rejects(withStore({ ...r2, endpoint: undefined }), 'persistence.endpoint: is required with provider "r2"');
    rejects(withStore({ ...r2, endpoint: "s3://x" }), "persistence.endpoint: must be an http:// or https:// URL");
    ok(withStore({ provider: "s3", bucket: "b", endpoint: "http://127.0.0.1:9000" }));
  });
  it.each(["region", "endpoint"])("rejects %s for gcs", (field) => {
    rejects(withStore({ provider: "gcs", bucket: "b", [field]: "https://storage.example.com" }), `persistence.${field}: is not allowed with provider "gcs"`);
  });
  it("rejects access keys for gcs and requires both with r2", () => {
    rejects(withStore({ provider: "gcs", bucket: "b", access_key_env: "AK", secret_key_env: "SK" }), 'persistence.access_key_env: is not allowed with provider "gcs"');
    rejects(withStore({ ...r2, secret_key_env: undefined }), 'persistence.secret_key_env: is required with provider "r2"');
  });
  it("takes s3 access keys both or neither", () => {
    ok(withStore({ provider: "s3", bucket: "b" }));
    ok(withStore({ provider: "s3", bucket: "b", access_key_env: "AK", secret_key_env: "SK" }));
    rejects(withStore({ provider: "s3", bucket: "b", access_key_env: "AK" }), /^persistence\.secret_key_env: is required when the other/);
  });
  it("rejects fields the chosen provider would ignore", () => {
    rejects(withStore({ provider: "filesystem", directory: "d", bucket: "b" }), 'persistence.bucket: is not allowed with provider "filesystem"');
    rejects(withStore({ provider: "s3", bucket: "b", directory: "d" }), 'persistence.directory: is not allowed with provider "s3"');
  });
  it("accepts a relative prefix and rejects a leading slash, a backslash or ..", () => {
    expect(ok(withStore({ provider: "s3", bucket: "b", prefix: "svc/prod" })).persistence!.prefix).toBe("svc/prod");
    rejects(withStore({ provider: "s3", bucket: "b", prefix: "/svc" }), "persistence.prefix: must be relative (no leading /)");
    rejects(withStore({ provider: "s3", bucket: "b", prefix: "svc\\prod" }), "persistence.prefix: must not contain a backslash");
    rejects(withStore({ provider: "s3", bucket: "b", prefix: "svc/../x" }), "persistence.prefix: must not contain ..");
  });
  it("rejects a prefix with an empty or . folder or a control character, which no filesystem stores; a trailing / is one folder", () => {
    expect(ok(withStore({ provider: "filesystem", directory: "d", prefix: "svc/prod/" })).persistence!.prefix).toBe("svc/prod/");
    expect(ok(withStore({ provider: "filesystem", directory: "d", prefix: "svc.v2/.x" })).persistence!.prefix).toBe("svc.v2/.x");
    for (const prefix of ["x//y", "./x", ".", "x/./y", "x/.", "/"]) {
      expect(parseHostConfig(withStore({ provider: "filesystem", directory: "d", prefix })), prefix).toMatchObject({ ok: false });
    }
    rejects(withStore({ provider: "s3", bucket: "b", prefix: "x//y" }), "persistence.prefix: must not have an empty or . folder (// or /./)");
    rejects(withStore({ provider: "filesystem", directory: "d", prefix: "x/\u0000" }), "persistence.prefix: must not contain a control character");
    rejects(withStore({ provider: "filesystem", directory: "d", prefix: "x\ny" }), "persistence.prefix: must not contain a control character");
  });
  it("accepts interval_seconds 1 and 3600 and rejects 0 and 3601", () => {
    const fs = { provider: "filesystem", directory: "d" };
    expect(ok(withStore({ ...fs, interval_seconds: 1 })).persistence!.interval_seconds).toBe(1);
    expect(ok(withStore({ ...fs, interval_seconds: 3600 })).persistence!.interval_seconds).toBe(3600);
    rejects(withStore({ ...fs, interval_seconds: 0 }), "persistence.interval_seconds: must be between 1 and 3600");
    rejects(withStore({ ...fs, interval_seconds: 3601 }), "persistence.interval_seconds: must be between 1 and 3600");
  });
  it("accepts queue 1 and 10000 and rejects 0 and 10001", () => {
    const fs = { provider: "filesystem", directory: "d" };
    expect(ok(withStore({ ...fs, queue: 1 })).persistence!.queue).toBe(1);
    expect(ok(withStore({ ...fs, queue: 10000 })).persistence!.queue).toBe(10000);
    rejects(withStore({ ...fs, queue: 0 }), "persistence.queue: must be between 1 and 10000");
    rejects(withStore({ ...fs, queue: 10001 }), "persistence.queue: must be between 1 and 10000");
  });
});

describe("host configuration file: credential_keys and runners", () => {
  it("accepts active naming one of keys", () => {
    expect(ok(with_({ credential_keys: { active: "k2", keys: { k1: "KEY1", k2: "KEY2" } } })).credential_keys!.active).toBe("k2");
  });
  it("rejects active that names no key, and an empty keys map", () => {
    rejects(with_({ credential_keys: { active: "k3", keys: { k1: "KEY1" } } }), 'credential_keys.active: "k3" is not one of keys');
    rejects(with_({ credential_keys: { active: "k1", keys: {} } }), "credential_keys.keys: must name at least one key");
    rejects(with_({ credential_keys: { active: "k1", keys: { k1: "" } } }), "credential_keys.keys.k1: must name an environment variable");
  });
  it("accepts runners with a token_env and rejects an empty one", () => {
    expect(ok(with_({ runners: { token_env: "RUNNER" } })).runners).toEqual({ token_env: "RUNNER", regions: {} });
    rejects(with_({ runners: { token_env: "" } }), "runners.token_env: must name an environment variable");
    rejects(with_({ runners: {} }), "runners.token_env: is required");
  });

  it("accepts runner regions with an optional location hint, and rejects bad names and hints", () => {
    const regions = { eu: { location_hint: "weur" }, "us-east-2": {} };
    expect(ok(with_({ runners: { token_env: "RUNNER", regions } })).runners).toEqual({ token_env: "RUNNER", regions });
    rejects(with_({ runners: { token_env: "RUNNER", regions: { EU: {} } } }), "runners.regions.EU: region names are 1 to 32 lowercase letters, digits or dashes");
    rejects(
      with_({ runners: { token_env: "RUNNER", regions: { eu: { location_hint: "mars" } } } }),
      "runners.regions.eu.location_hint: must be one of wnam, enam, sam, weur, eeur, apac, apac-ne, apac-se, oc, afr, me",
    );
    rejects(with_({ runners: { token_env: "RUNNER", regions: { eu: { zone: "a" } } } }), "runners.regions.eu.zone: unknown field");
  });
});

describe("host configuration file: unknown fields and file text", () => {
  const fs = { provider: "filesystem", directory: "d" };
  it.each([
    ["extra", { ...base(), extra: 1 }],
    ["tokens[0].extra", withToken({ extra: 1 })],
    ["harnesses.pi.extra", withHarness({ extra: 1 })],
    ["providers.openai.extra", withProvider({ extra: 1 })],
    ["tools[0].extra", withTool({ extra: 1 })],
    ["limits.extra", withLimits({ extra: 1 })],
    ["persistence.extra", withStore({ ...fs, extra: 1 })],
    ["credential_keys.extra", with_({ credential_keys: { active: "k", keys: { k: "K" }, extra: 1 } })],
    ["runners.extra", with_({ runners: { token_env: "R", extra: 1 } })],
  ])("rejects the unknown field %s", (path, value) => rejects(value, `${path}: unknown field`));

  it("reports every problem at once, each naming its field", () => {
    const list = problems(with_({ listen: "x", limits: { queue: 0 }, tokens: [{ token_env: "", tenant: "" }] }));
    expect(list).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^listen: /),
        "limits.queue: must be between 1 and 1024",
        "tokens[0].token_env: must name an environment variable",
        "tokens[0].tenant: must be 1 to 128 bytes",
      ]),
    );
  });
  it("parses file text and accepts trailing whitespace and a byte-order mark", () => {
    expect(parseHostConfigText(`${JSON.stringify(base())}\n\n`).ok).toBe(true);
    expect(parseHostConfigText(`\uFEFF${JSON.stringify(base())}`).ok).toBe(true);
  });
  it("rejects trailing data after the root object", () => {
    const r = parseHostConfigText(`${JSON.stringify(base())}\n{"more": 1}`);
    expect(r).toEqual({ ok: false, problems: ["unexpected data after the root object at line 2 column 1"] });
  });
  it("rejects a number beyond the double range anywhere (a tool schema's would otherwise be stored as null)", () => {
    const tool = '{"name":"t","description":"d","url":"https://t.example","tenants":["a"],"input_schema":{"type":"object","properties":{"n":{"type":"number","maximum":1e400}}}}';
    const text = `{"tokens":[{"token_env":"T","tenant":"a"}],"harnesses":{"h":{"command":["x"]}},"tools":[${tool}]}`;
    expect(parseHostConfigText(text)).toEqual({ ok: false, problems: ["tools[0].input_schema.properties.n.maximum: number is out of range"] });
  });

  it("rejects a __proto__ key, which would otherwise vanish from a name map", () => {
    const text = '{"tokens":[{"token_env":"T","tenant":"a"}],"harnesses":{"__proto__":{"command":["x"]}}}';
    expect(parseHostConfigText(text)).toEqual({ ok: false, problems: ["harnesses.__proto__: the name __proto__ is not allowed"] });
  });
  it("rejects malformed JSON", () => {
    const r = parseHostConfigText('{"tokens": [}');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.problems[0]).toMatch(/^not valid JSON: /);
  });
  it.each(["[]", "null", '"config"', "42"])("rejects the root %s that is not an object", (text) => {
    expect(parseHostConfigText(text)).toEqual({ ok: false, problems: ["the configuration must be a JSON object"] });
  });
  /** A valid file padded with spaces to exactly `bytes` UTF-8 bytes. */
  const padded = (bytes: number, filler = " ") => {
    const text = JSON.stringify({ ...base(), data_dir: "PAD" });
    const pad = bytes - new TextEncoder().encode(text).length + 3;
    const enc = new TextEncoder().encode(filler).length;
    return text.replace("PAD", filler.repeat(Math.floor(pad / enc)) + " ".repeat(pad % enc));
  };
  it("accepts a file of exactly 4 MiB and rejects 4 MiB + 1 byte", () => {
    expect(parseHostConfigText(padded(MAX_CONFIG_BYTES)).ok).toBe(true);
    expect(parseHostConfigText(padded(MAX_CONFIG_BYTES + 1))).toEqual({
      ok: false,
      problems: ["the configuration is larger than 4194304 bytes (4 MiB)"],
    });
  });
  it("rejects a file nesting deeper than 128 levels, thousands included, with that problem alone", () => {
    // Wherever it nests (here an unknown field): nothing recursive may meet it, the schema check included.
    const nested = (levels: number) => JSON.stringify(base()).replace(/}$/, `,"deep":${"[".repeat(levels - 1)}${"]".repeat(levels - 1)}}`);
    expect(parseHostConfigText(nested(128))).toMatchObject({ ok: false, problems: ["deep: unknown field"] });
    expect(parseHostConfigText(nested(129))).toEqual({ ok: false, problems: ["the configuration nests deeper than 128 levels"] });
    expect(parseHostConfigText(nested(10_000))).toEqual({ ok: false, problems: ["the configuration nests deeper than 128 levels"] });
  });
  it("counts the 4 MiB limit in UTF-8 bytes, not characters", () => {
    const text = padded(MAX_CONFIG_BYTES + 1, "é");
    expect(text.length).toBeLessThan(MAX_CONFIG_BYTES);
    expect(parseHostConfigText(text).ok).toBe(false);
  });
});

describe("host configuration file: variables named like the Worker's own bindings", () => {
  const refused = (name: string) => `${name} is the name of one of the Worker's own bindings: name another variable`;

  it("refuses each binding name in every field that names a variable, and takes names that only resemble one", () => {
    expect(WORKER_BINDINGS).toContain("SESSIONS");
    for (const name of WORKER_BINDINGS) {
      rejects(withToken({ token_env: name }), `tokens[0].token_env: ${refused(name)}`);
      rejects(withProvider({ api_key_env: name }), `providers.openai.api_key_env: ${refused(name)}`);
      rejects(withTool({ token_env: name }), `tools[0].token_env: ${refused(name)}`);
      rejects(with_({ credential_keys: { active: "k1", keys: { k1: name } } }), `credential_keys.keys.k1: ${refused(name)}`);
      rejects(with_({ runners: { token_env: name } }), `runners.token_env: ${refused(name)}`);
      rejects(withStore({ provider: "s3", bucket: "b", access_key_env: name, secret_key_env: "S" }), `persistence.access_key_env: ${refused(name)}`);
      rejects(withStore({ provider: "s3", bucket: "b", access_key_env: "A", secret_key_env: name }), `persistence.secret_key_env: ${refused(name)}`);
      rejects(withStore({ provider: "filesystem", directory: "/tmp/s", postgres_env: name }), `persistence.postgres_env: ${refused(name)}`);
    }
    for (const name of ["SESSIONS_TOKEN", "sessions", "LOCAL_DISK_KEY", "XPERSISTENCE"]) {
      expect(ok(withToken({ token_env: name })).tokens[0]!.token_env).toBe(name);
    }
    expect(ok(withTool({})).tools[0]!.token_env).toBe("");
  });
});
