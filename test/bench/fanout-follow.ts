/**
 * Many streams over one connection (`npm run bench -- follow`): C clients each following S capsule
 * streams, measured in one run three ways at the same load, targets interleaved within each run:
 *
 * - `follow`: one `GET /v1/follow?stream=murmur:f0@now&…` connection per client (C connections);
 * - `separate`: the same clients with one native `GET /murmur/{c}/events` connection per stream
 *   (C × S connections, how a client follows S capsules without `/v1/follow`);
 * - `nchan` (the anchor): nginx + nchan + Redis, one multiplexed subscriber per client,
 *   `/sub/f0,f1,…` (nchan_channel_id_split_delimiter), each channel published to on its own.
 *
 * The publisher writes ~200-byte chunks to S simulated capsules (or nchan channels) in turn, seq N to
 * stream (N - 1) % S, at S × R events/s in all; every client should receive each one once. nchan's
 * bodies are `/v1/follow`'s envelope around the same record (fanout-event.ts: keyedEventData), so
 * both sides carry about the same bytes per event (the detail table shows what was read). The
 * subscribers (fanout-client.c, keyed) count each stream of a connection apart and report a seq seen
 * twice on a stream as repeated. Server (process + redis-server) on core 0, publisher and 4
 * subscriber processes on core 1, as in fanout.ts; CPU per delivered event, p50/p99 publish →
 * receipt, peak server RSS, the clients' own CPU, delivered/expected. Medians of the runs.
 *
 * Env: BENCH_FOLLOW_RUNS (3; BENCH_FANOUT_RUNS when only that is set), BENCH_FOLLOW_LOAD
 * (`CLIENTSxSTREAMSxRATE`, rate per stream: default `1000x10x4`, 40,000 deliveries/s),
 * BENCH_FOLLOW_TARGETS (`nchan,follow,separate`; `follow1` adds S `/v1/follow` connections of one
 * stream each), BENCH_FOLLOW_STORE (`redis`, or `embedded`: nchan keeps Redis), BENCH_FOLLOW_SECONDS
 * (window, 5), BENCH_FANOUT_CLIENTS (subscriber processes, 4), BENCH_SHORT=1 (a quick look: 3 s
 * window, 3 s warm-up, 2 runs). The warm-up otherwise is fanout-measure.ts's (BENCH_WARM_SECONDS).
 */
import { loadavg } from 'node:os';
import { num } from './bench-env.js';
import { writeBenchJson } from './bench-json.js';
import { fanoutClientKind } from './fanout-client-proc.js';
import { streamName } from './fanout-event.js';
import {
  flagged,
  fmt as f,
  fmtMs as ms,
  measure,
  medianSample,
  warmLabel,
  type FanoutSample,
  type MeasureSpec,
} from './fanout-measure.js';
import { canPin, CLIENT_CORE, haveCommand, killAll, SERVER_CORE } from './fanout-procs.js';
import { nchanMissing, type Server } from './fanout-servers.js';
import { runAlone } from './run-alone.js';
import type { Figure } from './scale-summary.js';

export type FollowTarget = 'nchan' | 'follow' | 'separate' | 'follow1';

interface FollowLoad {
  clients: number;
  streams: number;
  /** Events per second on each stream. */
  rate: number;
}

export const SHORT = process.env.BENCH_SHORT === '1';

export const parseFollowLoad = (spec: string | undefined): FollowLoad => {
  const m = /^(\d+)x(\d+)x(\d+)$/.exec((spec ?? '1000x10x4').trim());
  if (!m) throw new Error(`BENCH_FOLLOW_LOAD must be CLIENTSxSTREAMSxRATE, not ${spec}`);
  const load = { clients: Number(m[1]), streams: Number(m[2]), rate: Number(m[3]) };
  if (load.streams < 1 || load.streams > 255) throw new Error('BENCH_FOLLOW_LOAD: 1 to 255 streams');
  return load;
};

const keys = (streams: number): string[] => Array.from({ length: streams }, (_, i) => streamName(i));

/**
 * Each target's subscriber URLs, connections and events per connection (a share of every stream's
 * events: 1 when a connection carries all S streams, 1/S when it carries one).
 */
const plan = (
  t: FollowTarget,
  load: FollowLoad,
): { subs: number; share: number; urls: (s: Server) => string[] } => {
  const names = keys(load.streams);
  const all = { subs: load.clients, share: 1 };
  const each = { subs: load.clients * load.streams, share: 1 / load.streams };
  switch (t) {
    case 'nchan':
      return { ...all, urls: (s) => [`${s.subUrl}/${names.join(',')}`] };
    case 'follow':
      return {
        ...all,
        urls: (s) => [`${s.baseUrl}/v1/follow?${names.map((n) => `stream=murmur:${n}@now`).join('&')}`],
      };
    case 'separate':
      return { ...each, urls: (s) => names.map((n) => `${s.baseUrl}/murmur/${n}/events`) };
    case 'follow1':
      return { ...each, urls: (s) => names.map((n) => `${s.baseUrl}/v1/follow?stream=murmur:${n}@now`) };
  }
};

const LABEL: Record<FollowTarget, string> = {
  nchan: 'nchan multiplexed (1 conn/client)',
  follow: '/v1/follow (1 conn/client)',
  separate: 'native, 1 conn per stream',
  follow1: '/v1/follow, 1 conn per stream',
};

const cell = (s: FanoutSample | undefined): string =>
  s
    ? `${f(s.usPerEvent)} µs, ${ms(s.p99Ms)} ms, ${f(s.rssMb, 0)} MB` +
      (s.deliveredRatio < 0.99 ? ` (delivered ${f(s.deliveredRatio * 100, 0)} %)` : '')
    : '–';

/** Every run of a target delivered each event of every stream once: all expected, none repeated. */
const exact = (samples: FanoutSample[]): boolean =>
  samples.length > 0 && samples.every((s) => s.delivered === s.expected && s.repeated === 0);

/**
 * One run's delivery: `once` (all expected, none repeated), `repeated`, `short` (fewer than
 * expected while neither core was saturated: lost), or `behind` (fewer, on a saturated core: the
 * clients may still have been reading when the run's drain ended, so lag cannot be told from loss).
 */
export const delivery = (s: FanoutSample): 'once' | 'repeated' | 'short' | 'behind' => {
  if (s.repeated > 0) return 'repeated';
  if (s.delivered === s.expected) return 'once';
  const saturated = s.clientCore >= 0.9 || s.clientCpu >= 0.9 || s.serverCore >= 0.95;
  return saturated ? 'behind' : 'short';
};

export const benchFollow = async (runs: number): Promise<Figure[]> => {
  const load = parseFollowLoad(process.env.BENCH_FOLLOW_LOAD);
  const name = `${load.clients.toLocaleString('en')} clients × ${load.streams} streams × ${load.rate} ev/s`;
  if (!canPin()) {
    console.log('\n# follow: skipped (needs Linux /proc and taskset to pin server and clients)');
    return [{ figure: `/v1/follow ${name}`, target: '–', measured: 'skipped (no taskset)', met: null }];
  }
  const startLoad = loadavg();
  const store = process.env.BENCH_FOLLOW_STORE === 'embedded' ? 'embedded' : 'redis';
  const redis = haveCommand('redis-server');
  const missing = !redis ? 'redis-server is not installed' : nchanMissing();
  const wanted = (process.env.BENCH_FOLLOW_TARGETS ?? 'nchan,follow,separate').split(',');
  const targets = (['nchan', 'follow', 'separate', 'follow1'] as const).filter(
    (t) => wanted.includes(t) && (t === 'nchan' ? !missing : store === 'embedded' || redis),
  );
  if (missing) console.log(`\nanchor skipped: ${missing}`);
  const windowMs = (SHORT ? 3 : num('BENCH_FOLLOW_SECONDS', 5)) * 1000;
  const clientProcs = num('BENCH_FANOUT_CLIENTS', 4);
  console.log(
    `\n# many streams over one connection, ${name}: /v1/follow vs a connection per stream vs nchan ` +
      `multiplexed; server (process + redis-server) on core ${SERVER_CORE}, publisher + ${clientProcs} ` +
      `${fanoutClientKind()} processes on core ${CLIENT_CORE}; gateway store ${store}; ` +
      `${windowMs / 1000} s window after ${SHORT ? '3 s warm-up' : warmLabel()}; median of ${runs} runs`,
  );
  const samples = new Map<FollowTarget, FanoutSample[]>(targets.map((t) => [t, []]));
  try {
    for (let r = 0; r < runs; r++) {
      for (const t of targets) {
        const p = plan(t, load);
        const spec: MeasureSpec = {
          target: t === 'nchan' ? 'anchor' : store,
          subs: p.subs,
          share: p.share,
          rate: load.rate * load.streams,
          windowMs,
          clientProcs,
          streams: load.streams,
          keyed: true,
          ...(SHORT ? { warmMs: 3000 } : {}),
          prepare: (server) => Promise.resolve(p.urls(server)),
          label: `follow ${t} run ${r + 1}`,
        };
        try {
          samples.get(t)!.push(await measure(spec));
        } catch (err) {
          console.warn(`follow ${t} run ${r + 1}: ${(err as Error).message}`);
        }
      }
    }
  } finally {
    await killAll();
  }
  const med = new Map<FollowTarget, FanoutSample>();
  for (const [t, got] of samples) if (got.length > 0) med.set(t, medianSample(got));

  console.log('target: /v1/follow below a connection per stream in CPU per event and RSS; nchan beside it');
  console.table(
    targets.map((t) => {
      const m = med.get(t);
      return {
        target: LABEL[t],
        connections: plan(t, load).subs.toLocaleString('en'),
        'µs/ev': m ? f(m.usPerEvent, 2) : '–',
        'p50 ms': m ? ms(m.p50Ms) : '–',
        'p99 ms': m ? ms(m.p99Ms) : '–',
        'server RSS MB': m ? f(m.rssMb, 0) : '–',
        'server procs CPU': m ? `${f(m.serverCpu * 100, 0)} %` : '–',
        'of which redis': m ? `${f(m.redisCpu * 100, 0)} %` : '–',
        'client procs CPU': m ? `${f(m.clientCpu * 100, 0)} %` : '–',
        'core 0 / core 1 load': m ? `${f(m.serverCore * 100, 0)} / ${f(m.clientCore * 100, 0)} %` : '–',
        'bytes/ev read': m ? f(m.bytesPerEvent, 0) : '–',
        'delivered/expected': m ? `${m.delivered} / ${m.expected}` : '–',
        'repeated (max of runs)': m ? m.repeated : '–',
        'each run': (samples.get(t) ?? []).map(delivery).join(', '),
        flagged: m ? (flagged(m) ?? '') : '',
      };
    }),
  );
  const figures = followFigures(name, store, med, samples, missing);
  writeBenchJson('follow', {
    load,
    store,
    windowMs,
    runs,
    loadAverageAtStart: startLoad,
    targets,
    samples: Object.fromEntries(samples),
    medians: Object.fromEntries(med),
    figures,
  });
  return figures;
};

/** The summary rows: /v1/follow against a connection per stream, and against nchan multiplexed. */
const followFigures = (
  name: string,
  store: string,
  med: Map<FollowTarget, FanoutSample>,
  samples: Map<FollowTarget, FanoutSample[]>,
  missing: string | null,
): Figure[] => {
  const fo = med.get('follow');
  const sep = med.get('separate');
  const nc = med.get('nchan');
  const st = store === 'redis' ? 'Redis' : 'embedded';
  const notMeasured = (figure: string, target: string): Figure => ({
    figure,
    target,
    measured: 'not measured (failed or skipped)',
    met: null,
  });
  const out: Figure[] = [];
  const flagOf = (...xs: (FanoutSample | undefined)[]): string | null =>
    xs.map((x) => (x ? flagged(x) : null)).find((x) => x !== null) ?? null;

  const cpuFig = `/v1/follow ${name}: CPU/delivered event (${st})`;
  const cpuTarget = '≤ 1× a connection per stream';
  if (!fo || !sep) out.push(notMeasured(cpuFig, cpuTarget));
  else {
    const flag = flagOf(fo, sep);
    out.push({
      figure: cpuFig,
      target: cpuTarget,
      anchor: `${f(sep.usPerEvent)} µs (one connection per stream)`,
      measured: `${f(fo.usPerEvent)} µs (${f(fo.usPerEvent / sep.usPerEvent, 2)}×)${flag ? `; flagged: ${flag}` : ''}`,
      met: flag ? null : fo.usPerEvent <= sep.usPerEvent,
    });
  }
  const rssFig = `/v1/follow ${name}: server peak RSS (${st})`;
  const rssTarget = 'below a connection per stream';
  if (!fo || !sep) out.push(notMeasured(rssFig, rssTarget));
  else
    out.push({
      figure: rssFig,
      target: rssTarget,
      anchor: `${f(sep.rssMb, 0)} MB (one connection per stream)${nc ? `; nchan ${f(nc.rssMb, 0)} MB` : ''}`,
      measured: `${f(fo.rssMb, 0)} MB (${f(fo.rssMb / sep.rssMb, 2)}×)`,
      met: fo.rssMb < sep.rssMb,
    });
  const ncFig = `/v1/follow ${name}: CPU/delivered event, p99 vs nchan multiplexed (${st})`;
  const ncTarget = '≤ 1× anchor (both)';
  if (!fo) out.push(notMeasured(ncFig, ncTarget));
  else {
    const flag = flagOf(fo, nc);
    out.push({
      figure: ncFig,
      target: ncTarget,
      anchor: nc ? cell(nc) : `none (${missing ?? 'not measured'})`,
      measured:
        `${cell(fo)}` +
        (nc ? ` (${f(fo.usPerEvent / nc.usPerEvent, 2)}×, ${f(fo.p99Ms / nc.p99Ms, 2)}×)` : '') +
        (flag ? `; flagged: ${flag}` : ''),
      met: !nc || flag ? null : fo.usPerEvent <= nc.usPerEvent && fo.p99Ms <= nc.p99Ms,
    });
  }
  const onceFig = `/v1/follow ${name}: every event of every stream delivered once (${st})`;
  const got = samples.get('follow') ?? [];
  const kinds = got.map(delivery);
  out.push(
    got.length === 0
      ? notMeasured(onceFig, 'delivered = expected, none repeated, every run')
      : {
          figure: onceFig,
          target: 'delivered = expected, none repeated, every run',
          anchor: nc ? `nchan: ${exact(samples.get('nchan') ?? []) ? 'exact' : 'not exact'}` : '–',
          measured: got
            .map((s, i) => `${s.delivered}/${s.expected}, ${s.repeated} repeated (${kinds[i]})`)
            .join('; '),
          // A run behind on a saturated core is not judged; a repeat or a short count otherwise is.
          met: kinds.some((k) => k === 'repeated' || k === 'short')
            ? false
            : kinds.includes('behind')
              ? null
              : true,
        },
  );
  return out;
};

runAlone(import.meta.url, () =>
  benchFollow(num('BENCH_FOLLOW_RUNS', SHORT ? 2 : num('BENCH_FANOUT_RUNS', 3))),
);
