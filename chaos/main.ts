/**
 * `npm run chaos [-- --runs 20 --seed N --faults a,b --sessions 3 --budget 1800 --verbose]`
 *
 * Starts the service, a runner-host and the loopback peers, injects every fault `runs` times with
 * turns in flight, prints per fault the runs, retained events lost / doubled / misplaced, turns
 * not ending in a documented end state (bad_end), turns hurt that should have ended idle (harmed), 5xx
 * answers and broken-off runs, then stops everything it started. Exit 0 when all are 0, 1 on any
 * violation, 2 on bad usage. The seed is printed first: the same flags replay the same choices.
 */
import { FAULT_NAMES, formatReport, problemLines, reportViolations, runChaos } from "./chaos.ts";

const USAGE = `usage: npm run chaos -- [--runs N] [--seed N] [--faults ${FAULT_NAMES.join(",")}] [--sessions 1-3] [--budget SECONDS] [--verbose]`;

/** Defaults: the proof's 20 runs per fault, within half an hour on two busy cores. */
const DEFAULTS = { runs: 20, sessions: 3, budgetSeconds: 1800 };

function parse(argv: string[]) {
  const o = { runs: DEFAULTS.runs, seed: Math.floor(Math.random() * 2 ** 31), faults: FAULT_NAMES, sessions: DEFAULTS.sessions, budgetSeconds: DEFAULTS.budgetSeconds, verbose: false };
  for (let i = 0; i < argv.length; i++) {
    const [flag, value] = [argv[i]!, argv[i + 1]];
    const num = () => {
      const n = Number(value);
      if (!Number.isInteger(n) || n < 0) throw new Error(`${flag} needs a whole number`);
      i++;
      return n;
    };
    if (flag === "--runs") o.runs = num();
    else if (flag === "--seed") o.seed = num();
    else if (flag === "--sessions") o.sessions = Math.min(3, Math.max(1, num()));
    else if (flag === "--budget") o.budgetSeconds = num();
    else if (flag === "--verbose") o.verbose = true;
    else if (flag === "--faults") {
      o.faults = (value ?? "").split(",").filter(Boolean);
      const unknown = o.faults.filter((f) => !FAULT_NAMES.includes(f));
      if (unknown.length || o.faults.length === 0) throw new Error(`unknown faults: ${unknown.join(",") || "(none given)"}`);
      i++;
    } else throw new Error(`unknown flag ${flag}`);
  }
  return o;
}

async function main(): Promise<number> {
  let o: ReturnType<typeof parse>;
  try {
    o = parse(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`chaos: ${(e as Error).message}\n${USAGE}\n`);
    return 2;
  }
  process.stdout.write(
    `chaos: seed ${o.seed}, ${o.runs} runs per fault, ${o.sessions} sessions per run, budget ${o.budgetSeconds}s\n` +
      `replay: npm run chaos -- --seed ${o.seed} --runs ${o.runs} --sessions ${o.sessions} --faults ${o.faults.join(",")}\n`,
  );
  let total = 0;
  const reports = await runChaos({
    seed: o.seed,
    runs: o.runs,
    faults: o.faults,
    sessions: o.sessions,
    budgetMs: o.budgetSeconds * 1000,
    verbose: o.verbose,
    onReport(r) {
      const n = reportViolations(r, o.runs);
      total += n;
      process.stdout.write(`${formatReport(r)}\n${problemLines(r).join("\n")}${n > 0 ? "\n" : ""}`);
    },
  });
  const missing = o.faults.length - reports.length;
  process.stdout.write(`chaos: ${total + missing} violations${missing ? ` (${missing} faults not run)` : ""}\n`);
  return total + missing === 0 ? 0 : 1;
}

process.exitCode = await main();
