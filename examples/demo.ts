/**
 * `npm start`: the local stack with examples/local.json, plus the scripted OpenAI-compatible model
 * server that config points its `openai` provider at, so a fresh machine can run real turns with
 * no network and no keys.
 */
import { main } from "../runner-host/cli/main.ts";
import { startScriptedProvider } from "./scripted-provider.ts";

/** Port of `providers.openai.base_url` in examples/local.json. */
const PROVIDER_PORT = 8791;

// Nothing reads its recorded requests here, and a demo left running would keep every one.
const provider = await startScriptedProvider({ port: PROVIDER_PORT, record: false });
process.stdout.write(`scripted model server on ${provider.url} (directives: see examples/scripted-provider.ts)\n`);
const code = await main(["-config", "examples/local.json", ...process.argv.slice(2)]);
await provider.close();
process.exitCode = code;
