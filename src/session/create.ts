/**
 * The creation rules of docs/api.md "Sessions", applied in the Worker before any object is
 * touched. Returns what the SessionObject stores.
 */
import type { CreateSession, Tool } from "../shared/api-schema.ts";
import { forbidden, invalid, unsupported } from "../shared/errors.ts";
import { byteLength, newId } from "../shared/ids.ts";
import type { Runtime } from "../runtime.ts";
import { checkCredentialValue, encryptCredential } from "./credentials.ts";
import type { NewSession } from "./record.ts";
import type { ExecutorInfo } from "../shared/executor-protocol.ts";
import { hideParameters, isObject, sameJson, type StoredBinding } from "./bindings.ts";

const TOOL_NAME = /^[a-zA-Z][a-zA-Z0-9_]{0,63}$/;

/** Looks up a registered executor (undefined: no such executor). */
export type ExecutorLookup = (id: string) => Promise<ExecutorInfo | undefined>;

/** The first rule of create (docs/api.md "Sessions"): checked before the body's other fields too. */
export function requireHarness(rt: Runtime, harness: string): void {
  if (!Object.hasOwn(rt.config.harnesses, harness)) throw unsupported(`harness "${harness}" is not configured`);
}

export async function prepareSession(rt: Runtime, tenant: string, body: CreateSession, executor: ExecutorLookup): Promise<NewSession> {
  const { config } = rt;
  requireHarness(rt, body.harness);
  checkModel(rt, body.config.model);
  const instructions = body.config.instructions;
  if (instructions !== undefined && byteLength(instructions) > config.limits.input_bytes) {
    throw invalid(`config.instructions: longer than ${config.limits.input_bytes} bytes`);
  }

  const descriptors: Tool[] = [];
  const seen = new Set<string>();
  const add = (t: Tool, where: string) => {
    if (seen.has(t.name)) throw invalid(`${where}: tool "${t.name}" is enabled twice in this session`);
    seen.add(t.name);
    descriptors.push(t);
  };
  for (const name of body.config.tools) add(hostTool(rt, tenant, name), "config.tools");

  const aliases = new Set<string>();
  const bindings: StoredBinding[] = [];
  for (const [i, b] of (body.config.bindings ?? []).entries()) {
    const where = `config.bindings[${i}]`;
    if (aliases.has(b.alias)) throw invalid(`${where}.alias: "${b.alias}" is used twice`);
    aliases.add(b.alias);
    if (b.parameters !== undefined && !isObject(b.parameters)) throw invalid(`${where}.parameters: must be a JSON object`);
    const group: Tool[] = [];
    if (b.provider !== undefined) group.push(hostTool(rt, tenant, b.provider));
    for (const t of b.runtime ?? []) {
      if (!TOOL_NAME.test(t.name)) throw invalid(`${where}.runtime: tool name "${t.name}" does not match ${TOOL_NAME.source}`);
    }
    if (b.runtime !== undefined && b.executor === undefined) {
      throw invalid(`${where}.executor: required when runtime tools are listed`);
    }
    const runtime = b.executor === undefined ? undefined : await runtimeOf(b.executor.toLowerCase(), b.alias, b.runtime, where);
    group.push(...(runtime ?? []));
    const ops = b.operations;
    for (const op of ops ?? []) {
      if (!group.some((t) => t.name === op)) throw invalid(`${where}.operations: "${op}" is not a tool of this binding`);
    }
    const enabled = group.filter((t) => !ops || ops.includes(t.name));
    for (const t of enabled) add(hideParameters(t, b.parameters as Record<string, unknown> | undefined), where);
    const stored: StoredBinding = { alias: b.alias, tools: enabled.map((t) => t.name) };
    if (b.executor !== undefined) stored.executor = b.executor.toLowerCase();
    if (runtime !== undefined) stored.runtime = runtime;
    if (b.parameters !== undefined) stored.parameters = b.parameters as Record<string, unknown>;
    bindings.push(stored);
  }

  /**
   * The descriptors a runtime binding serves: those its executor registered. `runtime`, when the
   * client lists it too, must equal them; the executor must be this tenant's, open, and registered
   * for this alias.
   */
  async function runtimeOf(id: string, alias: string, listed: Tool[] | undefined, where: string): Promise<Tool[]> {
    const info = await executor(id);
    if (!info || info.tenant !== tenant) throw invalid(`${where}.executor: no executor ${id}`);
    if (info.closed) throw invalid(`${where}.executor: executor ${id} is closed`);
    if (info.binding !== alias) throw invalid(`${where}.executor: executor ${id} serves binding "${info.binding}", not "${alias}"`);
    if (listed !== undefined && !sameJson(listed, info.tools)) {
      throw invalid(`${where}.runtime: differs from the descriptors executor ${id} registered`);
    }
    return info.tools;
  }

  const id = newId();
  const credentials = [];
  const bound = new Set<string>();
  if (body.credentials && body.credentials.length > 0) {
    if (!config.credential_keys) {
      throw unsupported("credential overrides need credential_keys in the host configuration");
    }
    for (const [i, c] of body.credentials.entries()) {
      if (!aliases.has(c.binding)) throw invalid(`credentials[${i}].binding: no binding with alias "${c.binding}"`);
      if (bound.has(c.binding)) throw invalid(`credentials[${i}].binding: "${c.binding}" is given twice`);
      bound.add(c.binding);
      const b = body.config.bindings!.find((x) => x.alias === c.binding)!;
      // Only an executor's alone takes headers the service sets: a host tool beside it is called by the service.
      checkCredentialValue(c.binding, c.value, b.executor === undefined || b.provider !== undefined);
      credentials.push(await encryptCredential(config, rt.vars, { tenant, sessionId: id, alias: c.binding }, c.value));
    }
  }
  return { id, tenant, harness: body.harness, config: body.config, descriptors, credentials, bindings };
}

/**
 * Split on the first `/`; the prefix must be configured and its key non-empty
 * (docs/configuration.md "Providers").
 */
function checkModel(rt: Runtime, model: string): void {
  const slash = model.indexOf("/");
  if (slash <= 0 || slash === model.length - 1) {
    throw invalid(`config.model: "${model}" is not in provider/model form`);
  }
  const prefix = model.slice(0, slash);
  const provider = Object.hasOwn(rt.config.providers, prefix) ? rt.config.providers[prefix] : undefined;
  if (!provider) throw invalid(`config.model: provider "${prefix}" is not configured`);
  if (!rt.vars[provider.api_key_env]) {
    throw invalid(`config.model: the key variable of provider "${prefix}" is empty`);
  }
}

/**
 * A host tool the tenant may enable. An unknown name is refused like an unauthorized one (403), so
 * a tenant cannot probe for other tenants' tool names.
 */
function hostTool(rt: Runtime, tenant: string, name: string): Tool {
  const t = rt.toolsByName.get(name);
  if (!t || !t.tenants.includes(tenant)) throw forbidden(`tool "${name}" is not authorized for this tenant`);
  return descriptorOf(t);
}

export function descriptorOf(t: { name: string; description: string; input_schema: object; output_schema?: object | null }): Tool {
  const d: Tool = { name: t.name, description: t.description, input_schema: t.input_schema as Record<string, unknown> };
  if (t.output_schema) d.output_schema = t.output_schema as Record<string, unknown>;
  return d;
}
