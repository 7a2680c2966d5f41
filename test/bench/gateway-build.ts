/**
 * The gateway as a deployment runs it: `dist/bin/murmur-gateway` (`npm start`, the package's bin),
 * not through tsx. tsx transpiles in the process (about 40 MB more RSS at idle, and its loader on
 * every import), which a memory or CPU figure must not bill to the gateway. The launcher picks V8's
 * GC flags by the CPUs it may use (src/bin/murmur-gateway): pinned to the server core, the bench's
 * gateway gets what a deployment confined to one core gets. Built once per bench process with
 * `npm run build`.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = fileURLToPath(new URL('../..', import.meta.url));

let built = false;

/**
 * How to start the built gateway (building it first, once): the launcher, and the environment it
 * reads (this node binary; BENCH_GATEWAY_NODE_ARGS as more node flags for the gateway alone, e.g.
 * `--cpu-prof --cpu-prof-dir=…` to see where its time goes under a bench's load: NODE_OPTIONS refuses
 * --cpu-prof). In the fan-out bench, BENCH_GATEWAY_STDOUT=<file> keeps the gateway's stdout there,
 * for flags that print to it (`--trace-gc`, `--trace-deopt`).
 */
export const gatewayLaunch = (): { cmd: string; env: Record<string, string> } => {
  if (!built) {
    const out = spawnSync('npm', ['run', 'build', '--silent'], { cwd: REPO, stdio: 'inherit' });
    if (out.status !== 0) throw new Error('npm run build failed: the bench runs the built gateway');
    built = true;
  }
  return {
    cmd: join(REPO, 'dist/bin/murmur-gateway'),
    env: { NODE: process.execPath, GATEWAY_NODE_FLAGS: process.env.BENCH_GATEWAY_NODE_ARGS ?? '' },
  };
};
