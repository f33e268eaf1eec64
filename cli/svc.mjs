#!/usr/bin/env node
import { main } from "../runner-host/cli/main.ts";
process.exitCode = await main(process.argv.slice(2));
