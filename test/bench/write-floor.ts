/**
 * `npm run bench -- floor` (also in `extras`): what a socket write costs on this machine, with no
 * gateway in it. A bare Node sender on the server core writes one 200-byte chunk to each of 100
 * connections 500 times a second (native fan-out's 100 × 500 load), read by a C reader on the client
 * core; in the `+ Redis PING` runs it first awaits one PING to a redis-server on the server core, as
 * the gateway awaits its append. The two alternate, BENCH_FLOOR_RUNS pairs (3).
 *
 * Why it exists: native fan-out at 100 × 500 costs about 10 µs per delivered event for nchan and for
 * the gateway alike, and on Redis the gateway's figure moved between 11 and 18 µs from run to run
 * with the same Redis commands in each. This floor moves the same way (8.2–15.7 µs per write from
 * run to run, within minutes) while a pure compute loop does not: the machine's cost of a write, not
 * the gateway's code, sets the figure, and a ratio is only as good as the anchor and target runs
 * being in the same state. The PING pairs show what one awaited round trip per frame adds to a
 * fan-out's writes.
 */
import { buildBenchBinary } from './bench-binaries.js';
import {
  ask,
  canPin,
  cpuUs,
  forkPinned,
  SERVER_CORE,
  startPinnedRedis,
  stopProcess,
} from './fanout-procs.js';
import { median } from './fanout-measure.js';
import { freePort, redisServerAvailable } from '../support/redis-server.js';
import { num } from './bench-env.js';

const CONNECTIONS = 100;
const RATE = 500;
const WARM_MS = 2000;
const WINDOW_MS = 6000;

interface Row {
  run: number;
  mode: string;
  'sender µs/write': string;
  'redis-server µs/write': string;
  'total µs/write': string;
}

/** One floor sample: the sender's CPU per write (µs), and redis-server's when `withRedis`. */
const measureFloor = async (
  reader: string,
  withRedis: boolean,
): Promise<{ senderUs: number; redisUs: number }> => {
  const port = withRedis ? await freePort() : null;
  const redis = port ? await startPinnedRedis(port) : null;
  const sender = forkPinned(SERVER_CORE, new URL('./write-floor-sender.ts', import.meta.url).pathname);
  try {
    const redisBefore = redis ? cpuUs([redis.pid!]) : 0;
    const r = await ask<{ usPerWrite: number; rounds: number }>(
      sender,
      {
        type: 'run',
        reader,
        connections: CONNECTIONS,
        rate: RATE,
        warmMs: WARM_MS,
        windowMs: WINDOW_MS,
        redisPort: port,
      },
      'done',
      WARM_MS + WINDOW_MS + 30_000,
    );
    // redis-server's CPU over the whole run (warm-up included), spread over the window's writes:
    // an upper bound, small either way.
    const redisUs = redis ? (cpuUs([redis.pid!]) - redisBefore) / (r.rounds * CONNECTIONS) : 0;
    return { senderUs: r.usPerWrite, redisUs };
  } finally {
    sender.send({ type: 'stop' });
    await stopProcess(sender, 2000);
    if (redis) await stopProcess(redis, 2000);
  }
};

export const benchWriteFloor = async (): Promise<void> => {
  const reader = buildBenchBinary('write-floor-reader');
  if (!canPin() || !reader) {
    console.log('\n# write floor: skipped (needs taskset, /proc and a C compiler)');
    return;
  }
  const pairs = num('BENCH_FLOOR_RUNS', 3);
  const withRedis = redisServerAvailable();
  console.log(
    `\n# write floor: a bare Node sender (core ${SERVER_CORE}) writing 200 bytes to each of ${CONNECTIONS} ` +
      `connections ${RATE} times a second, a C reader on the client core; ${WINDOW_MS / 1000} s window after ` +
      `${WARM_MS / 1000} s; alternating${withRedis ? ' with one awaited Redis PING per round' : ' (no redis-server: bare only)'}`,
  );
  const rows: Row[] = [];
  const totals: Record<string, number[]> = {};
  for (let run = 1; run <= pairs; run++) {
    for (const mode of withRedis ? ['bare', '+ Redis PING'] : ['bare']) {
      const r = await measureFloor(reader, mode !== 'bare');
      const total = r.senderUs + r.redisUs;
      (totals[mode] ??= []).push(total);
      rows.push({
        run,
        mode,
        'sender µs/write': r.senderUs.toFixed(2),
        'redis-server µs/write': mode === 'bare' ? '–' : r.redisUs.toFixed(2),
        'total µs/write': total.toFixed(2),
      });
    }
  }
  console.table(rows);
  for (const [mode, xs] of Object.entries(totals))
    console.log(
      `${mode}: median ${median(xs).toFixed(2)} µs/write (${xs.map((x) => x.toFixed(2)).join(', ')})`,
    );
};
