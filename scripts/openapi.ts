/**
 * Writes `openapi.json` from the route table and the zod schemas. Run after changing either:
 * `npm run openapi`. test/unit/openapi.test.ts fails while the committed file is stale.
 */
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { openApiText } from "../src/shared/openapi.ts";

const file = fileURLToPath(new URL("../openapi.json", import.meta.url));
writeFileSync(file, openApiText());
process.stdout.write(`wrote ${file}\n`);
