/**
 * General Durable Streams throughput beside the reference Node server `@durable-streams/server`
 * (in-memory store, its README's standard setup) on the same machine: the gateway with
 * `durableStreams.writable` on its embedded store and on Redis (redis-server counted with it).
 * Each server alone on the server core, this process (the clients) on the client core, as in the
 * fan-out benches. For each content mode (JSON: one object per message; bytes:
 * application/octet-stream, one POST per message), all messages exactly 1 KB:
 *
 * - appends/s, one producer: `BENCH_DS_APPENDS` POSTs of one message each, sequential (each waits
 *   for the last's answer, one keep-alive connection), and `BENCH_DS_INFLIGHT_APPENDS` with
 *   `BENCH_DS_INFLIGHT` in flight (as many connections; no Stream-Seq or producer headers, so the
 *   protocol lets them land in any order); in JSON mode also `BENCH_DS_BATCH_APPENDS` messages in
 *   arrays of `BENCH_DS_BATCH` per POST (each phase long enough to measure: half a second or more);
 * - catch-up reads: a stream of `BENCH_DS_MESSAGES` messages, `BENCH_DS_READERS` readers at once,
 *   each reading it `BENCH_DS_PASSES` times from `offset=-1` to `Stream-Up-To-Date` (following
 *   Stream-Next-Offset: the reference answers the whole stream at once, the gateway in pages of at
 *   most 1,000 messages / 1 MiB); messages/s and MB/s, every message counted from the bytes.
 *
 * Per phase: the server's CPU (process + redis-server, /proc) in µs per message and the peak RSS,
 * the cores' loads. Runs interleave the servers (one fresh server per run); each figure is the
 * median of `runs`. A phase in which the clients (this process) were busier than the server and
 * near a full core is flagged: the clients, not the server, set that pace.
 *
 * `npm run bench -- streams`. Env: BENCH_DS_RUNS (3), BENCH_DS_APPENDS (3000), BENCH_DS_INFLIGHT
 * (16), BENCH_DS_INFLIGHT_APPENDS (15000), BENCH_DS_BATCH (100), BENCH_DS_BATCH_APPENDS (50000), BENCH_DS_MESSAGES (2000), BENCH_DS_READERS (50), BENCH_DS_PASSES (2), BENCH_DS_SIZE (1024),
 * BENCH_DS_MODES (`json,bytes`), BENCH_DS_TARGETS (`reference,embedded,redis`);
 * BENCH_GATEWAY_NODE_ARGS (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`) for the gateway alone.
 */
import { spawnSync } from 'node:child_process';
import type { Agent } from 'node:http';
import { num } from './bench-env.js';
import {
  appendBatches,
  appendMessages,
  catchUp,
  createStream,
  fillStream,
  keepAliveAgent,
  unavailable,
  type DsMode,
} from './ds-client.js';
import { startDsServer, type DsServer, type DsTarget } from './ds-servers.js';
import {
  canPin,
  CLIENT_CORE,
  coreLoad,
  coreTicks,
  cpuUs,
  haveCommand,
  killAll,
  rssBytes,
  SERVER_CORE,
} from './fanout-procs.js';
import { runAlone } from './run-alone.js';
import type { Figure } from './scale-summary.js';

interface Phase {
  /** Messages per second over the phase. */
  rate: number;
  /** MB/s (10^6 bytes) of message bodies moved. */
  mbPerSec: number;
  /** Server CPU (process + redis-server) per message, µs. */
  usPerMsg: number;
  /** Of usPerMsg, redis-server's. */
  redisUsPerMsg: number;
  /** Peak RSS of the server processes over the phase, MB. */
  rssMb: number;
  serverCore: number;
  clientCore: number;
  /** The server processes' CPU over the phase, in cores (1 = the whole server core). */
  serverCpu: number;
  /** This process's (the clients') CPU over the phase, in cores. */
  clientCpu: number;
  /** 503s the server answered (its store's deadline passed), each retried after its Retry-After. */
  unavailable: number;
}

type PhaseName = 'append 1' | 'append N' | 'append batch' | 'read';
/** `append batch` is JSON mode's alone. */
type Sample = Partial<Record<PhaseName, Phase>>;

const shape = () => ({
  appends: num('BENCH_DS_APPENDS', 3000),
  inFlight: num('BENCH_DS_INFLIGHT', 16),
  /** The faster phases move more messages, so that each lasts long enough to measure (≥ about 0.5 s). */
  inFlightAppends: num('BENCH_DS_INFLIGHT_APPENDS', 15_000),
  batch: num('BENCH_DS_BATCH', 100),
  batchAppends: num('BENCH_DS_BATCH_APPENDS', 50_000),
  messages: num('BENCH_DS_MESSAGES', 2000),
  readers: num('BENCH_DS_READERS', 50),
  passes: num('BENCH_DS_PASSES', 2),
  size: num('BENCH_DS_SIZE', 1024),
});
type Shape = ReturnType<typeof shape>;

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

/** Run `work` (which moves `messages` messages of `size` bytes) and measure the server meanwhile. */
const phase = async (
  server: DsServer,
  messages: number,
  size: number,
  work: () => Promise<void>,
): Promise<Phase> => {
  let peak = rssBytes(server.pids);
  const sampler = setInterval(() => (peak = Math.max(peak, rssBytes(server.pids))), 100);
  const [s0, c0] = [coreTicks(SERVER_CORE), coreTicks(CLIENT_CORE)];
  const cpu0 = cpuUs(server.pids);
  const redis0 = server.redisPid ? cpuUs([server.redisPid]) : 0;
  const t0 = performance.now();
  const own0 = process.cpuUsage();
  unavailable.count = 0;
  try {
    await work();
  } finally {
    clearInterval(sampler);
  }
  const seconds = (performance.now() - t0) / 1000;
  const own = process.cpuUsage(own0);
  const cpu = cpuUs(server.pids) - cpu0;
  const redis = server.redisPid ? cpuUs([server.redisPid]) - redis0 : 0;
  peak = Math.max(peak, rssBytes(server.pids));
  return {
    rate: messages / seconds,
    mbPerSec: (messages * size) / seconds / 1e6,
    usPerMsg: cpu / messages,
    redisUsPerMsg: redis / messages,
    rssMb: peak / 1e6,
    serverCore: coreLoad(s0, coreTicks(SERVER_CORE)),
    clientCore: coreLoad(c0, coreTicks(CLIENT_CORE)),
    serverCpu: cpu / 1e6 / seconds,
    clientCpu: (own.user + own.system) / 1e6 / seconds,
    unavailable: unavailable.count,
  };
};

/** One server, one mode: the three phases on fresh streams. */
const measureMode = async (
  server: DsServer,
  agent: Agent,
  mode: DsMode,
  s: Shape,
  run: number,
): Promise<Sample> => {
  const appendUrl = `${server.streamsUrl}/bench-${run}-${mode}-appends`;
  await createStream(agent, appendUrl, mode);
  // Warm-up (JIT, connections; JSON's batch path too): not measured.
  let first = Math.min(1000, s.appends);
  await appendMessages(agent, appendUrl, mode, 0, first, s.size, s.inFlight);
  if (mode === 'json') {
    const warmBatches = Math.min(2000, s.batchAppends);
    await appendBatches(agent, appendUrl, first, warmBatches, s.size, s.batch);
    first += warmBatches;
  }
  const one = await phase(server, s.appends, s.size, () =>
    appendMessages(agent, appendUrl, mode, first, s.appends, s.size, 1),
  );
  first += s.appends;
  const many = await phase(server, s.inFlightAppends, s.size, () =>
    appendMessages(agent, appendUrl, mode, first, s.inFlightAppends, s.size, s.inFlight),
  );

  first += s.inFlightAppends;
  // JSON only: a bytes stream's message is a whole POST.
  const batched =
    mode === 'json'
      ? await phase(server, s.batchAppends, s.size, () =>
          appendBatches(agent, appendUrl, first, s.batchAppends, s.size, s.batch),
        )
      : undefined;

  const readUrl = `${server.streamsUrl}/bench-${run}-${mode}-reads`;
  await createStream(agent, readUrl, mode);
  await fillStream(agent, readUrl, mode, s.messages, s.size);
  // Bounded: a page holds at least one message.
  const maxReads = s.messages + 1;
  const warm = await catchUp(agent, readUrl, mode, s.size, maxReads);
  if (warm.messages !== s.messages)
    throw new Error(`${mode}: a catch-up read ${warm.messages} messages of ${s.messages}`);
  const total = s.readers * s.passes * s.messages;
  let got = 0;
  const read = await phase(server, total, s.size, async () => {
    await Promise.all(
      Array.from({ length: s.readers }, async () => {
        for (let p = 0; p < s.passes; p++) {
          // Awaited first: `got += await …` would add to the value `got` had before the wait.
          const { messages } = await catchUp(agent, readUrl, mode, s.size, maxReads);
          got += messages;
        }
      }),
    );
  });
  if (got !== total) throw new Error(`${mode}: readers received ${got} messages of ${total}`);
  return { 'append 1': one, 'append N': many, ...(batched ? { 'append batch': batched } : {}), read };
};

const NAMES: Record<DsTarget, string> = {
  reference: '@durable-streams/server 0.3.7 (memory)',
  embedded: 'gateway (embedded)',
  redis: 'gateway (Redis)',
};

const f = (n: number, digits = 0): string =>
  Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: digits }) : '–';

const medianPhase = (ps: Phase[]): Phase => {
  const m = (k: keyof Phase): number => median(ps.map((p) => p[k]));
  return {
    rate: m('rate'),
    mbPerSec: m('mbPerSec'),
    usPerMsg: m('usPerMsg'),
    redisUsPerMsg: m('redisUsPerMsg'),
    rssMb: m('rssMb'),
    serverCore: m('serverCore'),
    clientCore: m('clientCore'),
    serverCpu: m('serverCpu'),
    clientCpu: m('clientCpu'),
    unavailable: m('unavailable'),
  };
};

/**
 * The clients, not the server, set the pace: this process was busy most of the phase and more than
 * the server's processes. (Core loads cannot say it on a shared machine: others' work fills both.)
 */
const clientBound = (p: Phase): boolean => p.clientCpu > 0.8 && p.clientCpu > p.serverCpu;

const PHASE_LABEL = (s: Shape): Record<PhaseName, string> => ({
  'append 1': 'appends/s, sequential',
  'append N': `appends/s, ${s.inFlight} in flight`,
  'append batch': `appends/s, ${s.batch} per POST (JSON)`,
  read: `catch-up reads, ${s.readers} readers`,
});

export const benchStreams = async (runs: number): Promise<Figure[]> => {
  const s = shape();
  const labels = PHASE_LABEL(s);
  if (!canPin()) {
    console.log('\n# Durable Streams vs the reference server: skipped (needs Linux /proc and taskset)');
    return [{ figure: 'Durable Streams throughput', target: '≥ reference', measured: 'skipped', met: null }];
  }
  const modes = (process.env.BENCH_DS_MODES ?? 'json,bytes')
    .split(',')
    .filter((m): m is DsMode => m === 'json' || m === 'bytes');
  const redis = haveCommand('redis-server');
  const wanted = (process.env.BENCH_DS_TARGETS ?? 'reference,embedded,redis').split(',');
  const targets = (['reference', 'embedded', 'redis'] as const).filter(
    (t) => wanted.includes(t) && (t !== 'redis' || redis),
  );
  if (!redis) console.log('redis-server not installed: the Redis rows are skipped');
  console.log(
    `\n# Durable Streams: ${s.size}-byte messages, ${modes.join(' and ')}; server (+ redis-server) on core ` +
      `${SERVER_CORE}, clients (node:http keep-alive, this process) on core ${CLIENT_CORE}; appends: ` +
      `${s.appends} POSTs of one message sequential, ${s.inFlightAppends} with ${s.inFlight} in flight` +
      `${modes.includes('json') ? `, ${s.batchAppends} in JSON arrays of ${s.batch}` : ''}; reads: ${s.readers} readers × ` +
      `${s.passes} catch-ups of a ${s.messages}-message stream from offset -1; median of ${runs} interleaved runs`,
  );
  spawnSync('taskset', ['-p', '-c', String(CLIENT_CORE), String(process.pid)], { stdio: 'ignore' });
  const samples = new Map<string, Sample[]>();
  try {
    for (let r = 0; r < runs; r++) {
      for (const t of targets) {
        let server: DsServer | null = null;
        // One pool per server: no socket outlives the server it was opened to.
        const agent = keepAliveAgent(Math.max(s.readers, s.inFlight, 16));
        try {
          server = await startDsServer(t);
          // One mode failing (its run is left out of the medians) does not take the other with it.
          for (const mode of modes) {
            const key = `${t}/${mode}`;
            try {
              samples.set(key, [...(samples.get(key) ?? []), await measureMode(server, agent, mode, s, r)]);
            } catch (err) {
              console.warn(`${t} ${mode} run ${r + 1}: ${(err as Error).message}`);
            }
          }
        } catch (err) {
          console.warn(`${t} run ${r + 1}: ${(err as Error).message}`);
        } finally {
          agent.destroy();
          await server?.stop();
        }
      }
    }
  } finally {
    await killAll();
    spawnSync('taskset', ['-p', '-c', `${SERVER_CORE},${CLIENT_CORE}`, String(process.pid)], {
      stdio: 'ignore',
    });
  }

  const med = (t: DsTarget, mode: DsMode, p: PhaseName): Phase | undefined => {
    const got = (samples.get(`${t}/${mode}`) ?? []).flatMap((x) => (x[p] ? [x[p]] : []));
    return got.length > 0 ? medianPhase(got) : undefined;
  };
  const detail: Record<string, string>[] = [];
  for (const mode of modes)
    for (const p of Object.keys(labels) as PhaseName[])
      for (const t of targets) {
        const m = med(t, mode, p);
        if (!m) continue;
        const ref = med('reference', mode, p);
        detail.push({
          mode,
          phase: labels[p],
          server: NAMES[t],
          'msgs/s': f(m.rate),
          'MB/s': f(m.mbPerSec, 1),
          '× reference': t !== 'reference' && ref ? `${f(m.rate / ref.rate, 2)}×` : '–',
          'server µs/msg': f(m.usPerMsg, 1),
          'of which redis': t === 'redis' ? f(m.redisUsPerMsg, 1) : '–',
          'server RSS MB (peak)': f(m.rssMb),
          'server / client CPU': `${f(m.serverCpu * 100)} / ${f(m.clientCpu * 100)} %${clientBound(m) ? ' (client-bound)' : ''}`,
          '503s retried': f(m.unavailable),
          'core 0 / core 1 load': `${f(m.serverCore * 100)} / ${f(m.clientCore * 100)} %`,
        });
      }
  console.log(
    'details (each column the median of the runs; server = process + its redis-server; CPU = the ' +
      "bench's own processes, in % of one core; core loads = everything on the core, others' work too; " +
      "a client-bound row's rate is the clients' pace, not the server's)",
  );
  console.table(detail);

  const figures: Figure[] = [];
  for (const t of targets.filter((x) => x !== 'reference'))
    for (const p of Object.keys(labels) as PhaseName[]) {
      const store = t === 'redis' ? 'Redis' : 'embedded';
      const figure = `Durable Streams ${labels[p]} (1 KB, ${store})`;
      const cells: string[] = [];
      const anchors: string[] = [];
      let met: boolean | null = true;
      // A phase a mode does not have (batches of a bytes stream) is left out, not "not measured".
      const measuredModes = modes.filter((mode) => p !== 'append batch' || mode === 'json');
      for (const mode of measuredModes) {
        const g = med(t, mode, p);
        const a = med('reference', mode, p);
        if (!g) {
          cells.push(`${mode}: not measured`);
          met = null;
          continue;
        }
        const unit = p === 'read' ? ` msgs/s (${f(g.mbPerSec)} MB/s)` : '/s';
        const flag = clientBound(g) || (a && clientBound(a)) ? ', client-bound' : '';
        const ratio = a ? ` = ${f(g.rate / a.rate, 2)}×` : '';
        const refused = g.unavailable > 0 ? `, ${f(g.unavailable)} 503s retried (median)` : '';
        cells.push(`${mode}: ${f(g.rate)}${unit}${ratio}, ${f(g.usPerMsg, 1)} µs/msg${refused}${flag}`);
        if (a)
          anchors.push(`${mode}: ${f(a.rate)}${p === 'read' ? ' msgs/s' : '/s'}, ${f(a.usPerMsg, 1)} µs/msg`);
        if (!a || flag) met = null;
        else if (met !== null) met = met && g.rate >= a.rate;
      }
      if (cells.length === 0) continue;
      figures.push({
        figure,
        target: '≥ reference',
        anchor: anchors.length ? anchors.join('; ') : 'none (reference not measured)',
        measured: cells.join('; '),
        met,
      });
    }
  return figures;
};

runAlone(import.meta.url, () => benchStreams(num('BENCH_DS_RUNS', 3)));
