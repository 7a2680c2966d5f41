/**
 * Where the gateway's memory is, on demand: a preload for the gateway process
 * (`--expose-gc --import=./test/bench/memory-probe.mjs`, which the idle bench adds itself with
 * BENCH_IDLE_BREAKDOWN=1). Each SIGUSR2 appends one JSON line to `<out>` (MEMORY_PROBE_OUT, default
 * `/tmp/memory-probe-<pid>.jsonl`): RSS as it is, then after a full collection RSS again and V8's
 * figures (heap used and committed, per space too; external and ArrayBuffer bytes). When the file
 * `<out>.ask` says `snapshot`, a heap snapshot follows, written to `<out>.<n>.heapsnapshot` for the
 * bench to read (parsed there: a snapshot parsed in here would stay in this process's RSS).
 * A plain JS file: the bench runs the built gateway with node, which cannot preload TypeScript.
 */
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import v8 from 'node:v8';

const out = process.env.MEMORY_PROBE_OUT ?? `/tmp/memory-probe-${process.pid}.jsonl`;

const rssKb = () => {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) : 0;
};

let n = 0;
process.on('SIGUSR2', () => {
  const rssAsIs = rssKb();
  globalThis.gc?.();
  const mem = process.memoryUsage();
  const line = {
    rssAsIsKb: rssAsIs,
    rssKb: rssKb(),
    heapUsed: mem.heapUsed,
    heapTotal: mem.heapTotal,
    external: mem.external,
    arrayBuffers: mem.arrayBuffers,
    spaces: Object.fromEntries(
      v8
        .getHeapSpaceStatistics()
        .map((s) => [s.space_name, { used: s.space_used_size, committed: s.physical_space_size }]),
    ),
    snapshot: null,
  };
  const ask = existsSync(`${out}.ask`) ? readFileSync(`${out}.ask`, 'utf8').trim() : '';
  if (ask === 'snapshot') line.snapshot = v8.writeHeapSnapshot(`${out}.${n++}.heapsnapshot`);
  appendFileSync(out, `${JSON.stringify(line)}\n`);
});
