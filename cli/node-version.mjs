/**
 * The `svc` command runs its TypeScript sources directly, which needs Node 24 (type stripping on by
 * default). An older Node fails on the first `.ts` import with ERR_UNKNOWN_FILE_EXTENSION, which
 * names neither the version needed nor where the project's own Node 24 is, so `cli/svc.mjs` asks
 * here first. Plain JavaScript on purpose: Node 20 must be able to parse this file.
 */

/** Major version `svc` needs. */
export const NODE_MAJOR_NEEDED = 24;

/** The refusal for a Node older than 24, or null when `version` (as in `process.versions.node`) will do. */
export function oldNodeProblem(version) {
  const major = Number.parseInt(String(version).split(".")[0], 10);
  if (Number.isInteger(major) && major >= NODE_MAJOR_NEEDED) return null;
  return `svc needs Node ${NODE_MAJOR_NEEDED} or later and this is Node ${version}: run it through npm (npm start, npx svc) or with the project's own Node 24, node_modules/.bin/node`;
}
