/**
 * The gateway as a deployment runs it: `node dist/src/cli.js` (`npm start`), not through tsx. tsx
 * transpiles in the process (about 40 MB more RSS at idle, and its loader on every import), which a
 * memory or CPU figure must not bill to the gateway. Built once per bench process with `npm run build`.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const REPO = fileURLToPath(new URL('../..', import.meta.url));

let built = false;

/**
 * Arguments for `process.execPath` that start the built gateway CLI (building it first, once).
 * BENCH_GATEWAY_NODE_ARGS adds node flags to the gateway alone (e.g. `--cpu-prof --cpu-prof-dir=…`
 * to see where its time goes under a bench's load; NODE_OPTIONS refuses --cpu-prof). In the fan-out
 * bench, BENCH_GATEWAY_STDOUT=<file> keeps the gateway's stdout there, for flags that print to it
 * (`--trace-gc`, `--trace-deopt`).
 */
export const gatewayArgs = (): string[] => {
  if (!built) {
    const out = spawnSync('npm', ['run', 'build', '--silent'], { cwd: REPO, stdio: 'inherit' });
    if (out.status !== 0) throw new Error('npm run build failed: the bench runs the built gateway');
    built = true;
  }
  const extra = (process.env.BENCH_GATEWAY_NODE_ARGS ?? '').split(' ').filter(Boolean);
  return [...extra, 'dist/src/cli.js'];
};
