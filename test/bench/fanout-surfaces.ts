/**
 * BeeOS and Flue SSE fan-out against native (within 1.5× of native per delivered
 * envelope/chunk). One busy capsule (fanout-workload.ts) keeps 100 conversations streaming at once;
 * 1,000 subscribers are spread evenly over them, 10 per conversation, on BeeOS
 * `GET /api/v1/agents/{a}/conversations/{id}/events` or Flue `?view=updates&live=sse`, each
 * receiving its conversation's chunks at `perSub` chunks/s (so the capsule writes 100 × perSub).
 * The native run has the same 1,000 subscribers on `GET /murmur/{c}/events` of the same kind of
 * capsule writing `perSub` chunks/s in all, so every subscriber of every surface receives the same
 * number of chunks per second and the server delivers the same number in all; the figure is server
 * CPU (gateway + redis-server) per delivered chunk, surface ÷ native. The surfaces' runs also carry
 * their capsule's 100× larger ingest: that is what 100 busy conversations cost, and is part of the
 * figure. Processes are pinned as in fanout.ts (fanout-measure.ts); a sample whose clients set the
 * pace or whose server core saturates is flagged, not judged.
 *
 * `npm run bench -- surfaces`. Env: BENCH_SURFACES_LOADS (`1000x40`: subscribers × chunks/s each),
 * BENCH_SURFACES_STORES (`redis`, or `embedded,redis`), BENCH_SURFACES_CONVERSATIONS (100),
 * BENCH_SURFACES_CHUNKS (chunks per task, 20: BeeOS envelopes carry the cumulative reply),
 * BENCH_SURFACES_TEXT (chunk text bytes, 64), BENCH_FANOUT_SECONDS, BENCH_FANOUT_CLIENTS; the number
 * of interleaved runs is run.ts's BENCH_SURFACES_RUNS (5).
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import {
  flagged,
  fmt,
  fmtMs,
  measure,
  medianSample,
  warmLabel,
  type FanoutSample,
  type MeasureSpec,
} from './fanout-measure.js';
import { ask, canPin, CLIENT_CORE, haveCommand, killAll, SERVER_CORE } from './fanout-procs.js';
import type { Server } from './fanout-servers.js';
import { createBeeosConversation, createFlueConversation } from './scale-setup.js';
import type { Figure } from './scale-summary.js';
import { num } from './bench-env.js';
import { fanoutClientKind } from './fanout-client-proc.js';

type Surface = 'native' | 'beeos' | 'flue';
const NAMES: Record<Surface, string> = { native: 'native', beeos: 'BeeOS', flue: 'Flue' };

interface Shape {
  conversations: number;
  chunksPerTask: number;
  textBytes: number;
}

/** Create the conversations on `surface` through the gateway; each one's SSE URL, in creation order. */
const createConversations = async (surface: 'beeos' | 'flue', base: string, n: number): Promise<string[]> => {
  const urls: string[] = [];
  for (let i = 0; i < n; i++) {
    if (surface === 'flue') {
      await createFlueConversation(base, 'bench', `conv-${i}`);
      urls.push(`${base}/flue/bench/conv-${i}?view=updates&live=sse&offset=-1`);
    } else {
      const id = await createBeeosConversation(base, 'bench');
      urls.push(`${base}/api/v1/agents/bench/conversations/${id}/events`);
    }
  }
  return urls;
};

/** What a surface's subscribers read, and the capsule workload behind it. */
const prepare =
  (surface: Surface, shape: Shape) =>
  async (server: Server, publisher: ChildProcess): Promise<string[]> => {
    if (surface === 'native') {
      await ask(publisher, { type: 'workload', spec: shape }, 'workload');
      return [server.subUrl];
    }
    const urls = await createConversations(surface, server.baseUrl!, shape.conversations);
    // The capsule ran one task per creation, in order (queue acceptance): its contexts, in that order.
    const { contexts } = await ask<{ contexts: string[] }>(
      publisher,
      { type: 'contexts' },
      'contexts',
      60_000,
    );
    if (contexts.length !== urls.length)
      throw new Error(`${contexts.length} contexts seen by the capsule for ${urls.length} conversations`);
    await ask(publisher, { type: 'workload', spec: { ...shape, contexts } }, 'workload');
    return urls;
  };

const cell = (s: FanoutSample): string =>
  `${fmt(s.usPerEvent, 1)} µs, ${fmtMs(s.p99Ms)} ms${s.deliveredRatio < 0.99 ? ` (delivered ${fmt(s.deliveredRatio * 100, 0)} %)` : ''}`;

export const benchSurfaces = async (runs: number): Promise<Figure[]> => {
  const target = '≤ 1.5× native';
  if (!canPin()) {
    console.log('\n# surface fan-out: skipped (needs Linux /proc and taskset)');
    return [{ figure: 'BeeOS / Flue SSE fan-out', target, measured: 'skipped (no taskset)', met: null }];
  }
  const windowMs = num('BENCH_FANOUT_SECONDS', 5) * 1000;
  const clientProcs = num('BENCH_FANOUT_CLIENTS', 4);
  const shape: Shape = {
    conversations: num('BENCH_SURFACES_CONVERSATIONS', 100),
    chunksPerTask: num('BENCH_SURFACES_CHUNKS', 20),
    textBytes: num('BENCH_SURFACES_TEXT', 64),
  };
  const loads = (process.env.BENCH_SURFACES_LOADS ?? '1000x40')
    .split(',')
    .map((s) => /^(\d+)x(\d+)$/.exec(s.trim()))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ subs: Number(m[1]), perSub: Number(m[2]) }));
  const redis = haveCommand('redis-server');
  const stores = (process.env.BENCH_SURFACES_STORES ?? (redis ? 'redis' : 'embedded'))
    .split(',')
    .filter((s): s is 'embedded' | 'redis' => s === 'embedded' || (s === 'redis' && redis));
  console.log(
    `\n# BeeOS / Flue SSE fan-out vs native: subscribers spread over ${shape.conversations} conversations of ` +
      `one capsule (tasks of ${shape.chunksPerTask} chunks of ${shape.textBytes} bytes), every subscriber ` +
      `receiving the same chunks/s on each surface; server on core ${SERVER_CORE}, publisher + ` +
      `${clientProcs} ${fanoutClientKind()} processes on core ${CLIENT_CORE}; ${windowMs / 1000} s window after ${warmLabel()}; median of ${runs} runs`,
  );
  spawnSync('taskset', ['-p', '-c', String(CLIENT_CORE), String(process.pid)], { stdio: 'ignore' });
  const figures: Figure[] = [];
  const detail: Record<string, string | number>[] = [];
  try {
    for (const store of stores) {
      for (const { subs, perSub } of loads) {
        const load = `${subs.toLocaleString('en')} subs × ${perSub} chunks/s each`;
        const samples = new Map<Surface, FanoutSample[]>([
          ['native', []],
          ['beeos', []],
          ['flue', []],
        ]);
        for (let r = 0; r < runs; r++) {
          for (const surface of ['native', 'beeos', 'flue'] as const) {
            const n = surface === 'native' ? 1 : shape.conversations;
            const spec: MeasureSpec = {
              target: store,
              subs,
              rate: perSub * n,
              share: 1 / n,
              warmRate: perSub,
              windowMs,
              clientProcs,
              acceptance: 'queue',
              prepare: prepare(surface, shape),
              label: `${load} ${surface} (${store})`,
            };
            try {
              samples.get(surface)!.push(await measure(spec));
            } catch (err) {
              console.warn(`${spec.label} run ${r + 1}: ${(err as Error).message}`);
            }
          }
        }
        const med = new Map<Surface, FanoutSample>();
        for (const [surface, got] of samples) {
          if (got.length === 0) continue;
          const m = medianSample(got);
          med.set(surface, m);
          detail.push({
            load,
            store,
            surface: NAMES[surface],
            'µs/chunk': fmt(m.usPerEvent, 2),
            'p50 ms': fmtMs(m.p50Ms),
            'p99 ms': fmtMs(m.p99Ms),
            'server RSS MB': fmt(m.rssMb, 0),
            'server procs CPU': `${fmt(m.serverCpu * 100, 0)} %`,
            'of which redis': `${fmt(m.redisCpu * 100, 0)} %`,
            'client procs CPU': `${fmt(m.clientCpu * 100, 0)} %`,
            'core 0 / core 1 load': `${fmt(m.serverCore * 100, 0)} / ${fmt(m.clientCore * 100, 0)} %`,
            'delivered/expected': fmt(m.deliveredRatio, 3),
            'subs ended': m.ended,
          });
        }
        const native = med.get('native');
        for (const surface of ['beeos', 'flue'] as const) {
          const s = med.get(surface);
          const figure = `${NAMES[surface]} SSE fan-out, ${load} over ${shape.conversations} conversations: CPU/delivered chunk (${store === 'redis' ? 'Redis' : 'embedded'})`;
          const anchor = native ? `native ${cell(native)}` : 'native not measured';
          if (!s) {
            figures.push({ figure, target, anchor, measured: 'failed (see above)', met: null });
            continue;
          }
          const flag = flagged(s) ?? (native ? flagged(native) : null);
          const ratio = native ? s.usPerEvent / native.usPerEvent : NaN;
          figures.push({
            figure,
            target,
            anchor,
            measured: `${cell(s)} (${fmt(ratio, 2)}×)${flag ? `; flagged: ${flag}` : ''}`,
            met: !native || flag ? null : ratio <= 1.5,
          });
        }
      }
    }
  } finally {
    await killAll();
    spawnSync('taskset', ['-p', '-c', `${SERVER_CORE},${CLIENT_CORE}`, String(process.pid)], {
      stdio: 'ignore',
    });
  }
  console.table(detail);
  return figures;
};
