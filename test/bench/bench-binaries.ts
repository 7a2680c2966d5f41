/**
 * The benches' C clients (storm-client.c, fanout-client.c), built once per run with the machine's C
 * compiler into the temp dir. They exist because Node clients on the one client core cost more than
 * the server they measure (see each file's header); without a compiler the benches fall back to
 * their Node clients and say so. BENCH_NODE_CLIENTS=1 forces that fallback.
 */
import { spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const built = new Map<string, string | null>();

/** `test/bench/<name>.c` compiled (once per process); null when there is no working C compiler. */
export const buildBenchBinary = (
  name: 'storm-client' | 'fanout-client' | 'write-floor-reader',
): string | null => {
  if (process.env.BENCH_NODE_CLIENTS === '1') return null;
  const hit = built.get(name);
  if (hit !== undefined) return hit;
  const out = join(tmpdir(), `murmur-bench-${name}-${process.pid}`);
  const src = new URL(`./${name}.c`, import.meta.url).pathname;
  const cc = spawnSync('cc', ['-O2', '-o', out, src, '-lm'], { encoding: 'utf8' });
  const binary = cc.status === 0 ? out : null;
  if (!binary)
    console.log(`${name}.c: not built (${cc.error?.message ?? cc.stderr.trim()}); Node clients instead`);
  built.set(name, binary);
  return binary;
};
