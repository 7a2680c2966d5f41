/**
 * Where the gateway's garbage comes from under a bench's load: a preload for the gateway process
 * (`BENCH_GATEWAY_NODE_ARGS="--import=./test/bench/alloc-probe.mjs"`, with `--no-turbo-inlining` to
 * bill each allocation to the function that makes it rather than to its inlining caller). After
 * ALLOC_PROBE_DELAY_MS (7,000: past a fan-out run's start and warm-up) it samples allocations for
 * ALLOC_PROBE_MS (5,000), objects already collected included, and writes the total rate and the top
 * sites (with two callers) to ALLOC_PROBE_OUT (`/tmp/alloc-probe-<pid>.txt`). A plain JS file: the
 * bench runs the built gateway with node, which cannot preload TypeScript.
 */
import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';

const delayMs = Number(process.env.ALLOC_PROBE_DELAY_MS ?? 7000);
const windowMs = Number(process.env.ALLOC_PROBE_MS ?? 5000);
const out = process.env.ALLOC_PROBE_OUT ?? `/tmp/alloc-probe-${process.pid}.txt`;
// ALLOC_PROBE_SURVIVORS=1: only what outlived a scavenge (what each one copies, then promotes).
const survivors = process.env.ALLOC_PROBE_SURVIVORS === '1';

const session = new Session();
session.connect();
const post = (method, params) =>
  new Promise((resolve, reject) =>
    session.post(method, params, (err, result) => (err ? reject(err) : resolve(result))),
  );

const frameName = (node) => {
  const { functionName, url, lineNumber } = node.callFrame;
  return `${functionName || '(anonymous)'} ${url.split('/').slice(-2).join('/')}:${lineNumber}`;
};

const report = (profile, seconds) => {
  const bySite = new Map();
  const walk = (node, stack) => {
    const here = [...stack, frameName(node)];
    if (node.selfSize) {
      const site = here.slice(-3).reverse().join(' < ');
      bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
    }
    for (const child of node.children) walk(child, here);
  };
  walk(profile.head, []);
  let total = 0;
  for (const bytes of bySite.values()) total += bytes;
  const lines = [`total ${(total / seconds / 1e6).toFixed(2)} MB/s over ${seconds.toFixed(1)} s`];
  for (const [site, bytes] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, 40))
    lines.push(`${(bytes / seconds / 1e3).toFixed(0).padStart(7)} KB/s  ${site}`);
  writeFileSync(out, `${lines.join('\n')}\n`);
};

setTimeout(() => {
  void post('HeapProfiler.startSampling', {
    samplingInterval: 1024,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: !survivors,
  }).then(() => {
    const startedAt = Date.now();
    setTimeout(() => {
      void post('HeapProfiler.stopSampling').then(({ profile }) =>
        report(profile, (Date.now() - startedAt) / 1000),
      );
    }, windowMs).unref();
  });
}, delayMs).unref();
