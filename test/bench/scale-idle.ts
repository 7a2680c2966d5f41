/**
 * Idle SSE followers on one gateway process, spread over the three surfaces (native
 * `GET /murmur/{c}/events`, BeeOS conversation events, Flue `?view=updates&live=sse&offset=-1`),
 * embedded store and Redis. Two sizes:
 *
 * - 10,000 connections: the gateway process's RSS with every connection open (target ≤ 300 MB),
 *   beside its RSS before and per connection;
 * - as many as the process's file limit allows (its hard limit, to which the bench raises the soft
 *   one, less the descriptors the gateway holds before any client and a margin): per follower, the
 *   process's RSS plus its share of redis-server's (all of it: this is the only replica), target
 *   ≤ 12 KB (50,000 followers in about 600 MB).
 *
 * Gateway (and redis-server) on core 0, client processes on core 1; loopback only.
 *
 * `npm run bench -- idle`. Env: BENCH_IDLE_CONNECTIONS (10000), BENCH_IDLE_CAP (0 skips the file-cap
 * rows; a number sets their count), BENCH_IDLE_SETTLE_SECONDS (240: how long the file-cap rows' followers
 * may idle before the judged reading, taken once RSS has settled: `settle`; 0 judges the reading
 * 2 s after the last opened), BENCH_SCALE_CLIENTS (4),
 * BENCH_IDLE_STORES (`embedded,redis`), BENCH_IDLE_TRACE=1 (RSS every 2 s for BENCH_IDLE_TRACE_SECONDS, 20), BENCH_IDLE_SURFACES
 * (`native,beeos,flue`: one surface alone shows what each connection costs).
 *
 * BENCH_IDLE_BREAKDOWN=1 instead shows where the bytes of one follower go, per surface
 * (BENCH_IDLE_BREAKDOWN_CONNECTIONS each, 5,000; embedded store, or BENCH_IDLE_BREAKDOWN_STORE=redis):
 * the gateway runs with
 * memory-probe.mjs, which reads RSS and V8's figures before and with the connections open, and
 * writes a heap snapshot with them open and after they left (summed by kind here); the difference per connection is printed (not a
 * summary figure). BENCH_IDLE_KEEP_SNAPSHOTS=1 keeps the two snapshots (their paths are printed).
 */
import { existsSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startSimulator } from '../../src/simulator/index.js';
import { ask, CLIENT_CORE, rssBytes } from './fanout-procs.js';
import { MB, startBenchGateway, startBenchRedis, until, type BenchRedis } from './scale-gateway.js';
import {
  createBeeosConversation,
  createFlueConversation,
  errorSummary,
  share,
  startClients,
  stopClients,
} from './scale-setup.js';
import type { Figure } from './scale-summary.js';
import { num } from './bench-env.js';

type Surface = 'native' | 'beeos' | 'flue';

interface IdleResult {
  store: string;
  connections: number;
  failed: number;
  rssBeforeMb: number;
  rssOpenMb: number;
  redisBeforeMb: number;
  redisOpenMb: number;
  kbPerConnection: number;
  openSeconds: number;
  /**
   * With `settleSeconds`: the RSS once the followers had idled until it settled (V8 gives back the
   * young generation and the old space a burst of connections grew only once its memory reducer
   * runs, 20–90 s after the last allocation-heavy moment), and how long that was; else null.
   */
  settled: { seconds: number; rssMb: number; redisMb: number; openFiles: number } | null;
  /** BENCH_IDLE_BREAKDOWN: the probe's figures before and with the followers, and what they hold. */
  probe: { before: ProbeLine; open: ProbeLine; held: Kinds } | null;
}

/** One line of memory-probe.mjs: RSS as it was, then after a full collection with V8's figures. */
interface ProbeLine {
  rssAsIsKb: number;
  rssKb: number;
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
  spaces: Record<string, { used: number; committed: number }>;
  /** The heap snapshot's file, when one was asked for. */
  snapshot: string | null;
}

type Kinds = Map<string, { count: number; bytes: number }>;

const PROBE = new URL('./memory-probe.mjs', import.meta.url).pathname;

/**
 * Signal the probe (after a full collection it reads its figures; with `snapshot`, it then writes a
 * heap snapshot) and wait for its line: a snapshot of a few hundred MB of heap takes seconds.
 */
const probe = async (pid: number, file: string, snapshot: boolean): Promise<ProbeLine> => {
  const lines = (): string[] =>
    existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : [];
  const had = lines().length;
  writeFileSync(`${file}.ask`, snapshot ? 'snapshot' : 'figures');
  process.kill(pid, 'SIGUSR2');
  await until(async () => lines().length > had, 300_000, 'the memory probe');
  return JSON.parse(lines()[had]!) as ProbeLine;
};

/**
 * Live objects in a heap snapshot by kind, count and V8's shallow size: objects by constructor,
 * closures by function name, native objects by Node's label; strings, code, arrays and the like by
 * type (their names are their contents).
 */
const heapByKind = (file: string): Kinds => {
  const snap = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snap.snapshot.meta.node_fields;
  const types = snap.snapshot.meta.node_types[0];
  const stride = fields.length;
  const [iType, iName, iSize] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f)) as [
    number,
    number,
    number,
  ];
  const { nodes, strings } = snap;
  const kinds: Kinds = new Map();
  for (let i = 0; i < nodes.length; i += stride) {
    const type = types[nodes[i + iType]!]!;
    const named = type === 'object' || type === 'native' || type === 'closure' || type === 'synthetic';
    const kind = named ? `${type} ${strings[nodes[i + iName]!]!.slice(0, 60)}` : type;
    const k = kinds.get(kind) ?? { count: 0, bytes: 0 };
    k.count++;
    k.bytes += nodes[i + iSize]!;
    kinds.set(kind, k);
  }
  return kinds;
};

/** Descriptors the process may open (its soft limit, as raised) and has open now. */
const fdRoom = (pid: number): { limit: number; open: number } => {
  const m = /Max open files\s+(\d+)/.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'));
  return { limit: m ? Number(m[1]) : 1024, open: readdirSync(`/proc/${pid}/fd`).length };
};

/** The gateway's young generation, committed (its /metrics); null when it cannot be read. */
const newSpaceBytes = async (baseUrl: string): Promise<number | null> => {
  try {
    const text = await (await fetch(`${baseUrl}/metrics`)).text();
    const m = /nodejs_heap_space_size_total_bytes\{space="new"\} (\d+)/.exec(text);
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
};

/** V8 commits a young generation of 32 MB under load and shrinks it in a memory-reducing collection. */
const REDUCED_NEW_SPACE = 8 * MB;

/**
 * Wait, at most `maxSeconds`, for the process to give back what the burst of connections grew. V8
 * does that in its memory reducer's collections, once the allocation rate has been low for a
 * while: 25–110 s after the burst here, so no fixed wait fits. Its first collection shrinks the
 * young generation (read off the gateway's /metrics every 2 s), and the next ones follow within
 * seconds: done once the young generation is small and RSS has then held within 2 % for 20 s.
 * Resolves with the seconds waited.
 */
const settle = async (pid: number, baseUrl: string, maxSeconds: number): Promise<number> => {
  const t0 = performance.now();
  const recent: number[] = [];
  let reduced = false;
  for (;;) {
    await new Promise((r) => setTimeout(r, 2000));
    const waited = Math.round((performance.now() - t0) / 1000);
    if (!reduced) {
      const young = await newSpaceBytes(baseUrl);
      reduced = young !== null && young <= REDUCED_NEW_SPACE;
    }
    if (reduced) {
      recent.push(rssBytes([pid]));
      if (recent.length > 10) recent.shift();
    }
    const steady = recent.length === 10 && Math.max(...recent) <= Math.min(...recent) * 1.02;
    if (steady || waited >= maxSeconds) return waited;
  }
};

/** Descriptors left unused at the file cap: reconnects, a metrics scrape, the store's own. */
const FD_MARGIN = 200;

const measure = async (
  store: 'embedded' | 'redis',
  /** A count, or 'cap': as many as the gateway's file limit allows. */
  size: number | 'cap',
  procs: number,
  surfaces: readonly Surface[],
  withProbe: boolean,
  /** Also read RSS once the followers have idled this long (0: not). */
  settleSeconds = 0,
): Promise<IdleResult> => {
  const sim = await startSimulator({ heartbeatMs: 15_000 });
  let redis: BenchRedis | null = null;
  let gw: Awaited<ReturnType<typeof startBenchGateway>> | null = null;
  const clients = await startClients(CLIENT_CORE, procs);
  let probeFile = '';
  try {
    if (store === 'redis') redis = await startBenchRedis();
    gw = await startBenchGateway(
      { capsules: [{ id: 'idle', url: sim.url }] },
      redis?.url ?? null,
      withProbe ? `--expose-gc --import=${PROBE}` : '',
    );
    // The probe's default file: the pid is node's own (the launcher execs).
    probeFile = join(tmpdir(), `memory-probe-${gw.pid}.jsonl`);
    const base = gw.baseUrl;
    await until(async () => sim.watchers > 0, 30_000, 'the gateway watching the capsule');
    await createFlueConversation(base, 'idle', 'idle-conv');
    const beeos = await createBeeosConversation(base, 'idle');
    const targets = [
      { surface: 'native', url: `${base}/murmur/idle/events` },
      { surface: 'beeos', url: `${base}/api/v1/agents/idle/conversations/${beeos}/events` },
      { surface: 'flue', url: `${base}/flue/idle/idle-conv?view=updates&live=sse&offset=-1` },
    ].filter((t) => surfaces.includes(t.surface as Surface));
    if (targets.length === 0) throw new Error('BENCH_IDLE_SURFACES names no surface');
    await new Promise((r) => setTimeout(r, 1000));
    const room = fdRoom(gw.pid);
    const connections = size === 'cap' ? Math.floor((room.limit - room.open - FD_MARGIN) / 500) * 500 : size;
    if (connections > room.limit - room.open)
      throw new Error(
        `${connections} connections: the gateway may open ${room.limit - room.open} more files`,
      );
    const before = rssBytes([gw.pid]);
    const redisBefore = redis ? rssBytes([redis.pid]) : 0;
    const probeBefore = withProbe ? await probe(gw.pid, probeFile, false) : null;
    const t0 = performance.now();
    const answers = await Promise.all(
      clients.map((c, i) =>
        ask<{ failed: number; errors: [string, number][] }>(
          c,
          // Rotated per process so each surface gets its share of the connections.
          {
            type: 'open',
            targets: [...targets.slice(i % targets.length), ...targets.slice(0, i % targets.length)],
            count: share(connections, procs, i),
            batch: 100,
            timeoutMs: 60_000,
          },
          'ready',
          300_000,
        ),
      ),
    );
    const openSeconds = (performance.now() - t0) / 1000;
    const failed = answers.reduce((a, r) => a + r.failed, 0);
    if (failed) console.warn(`idle ${store}: ${failed} connections failed (${errorSummary(answers)})`);
    // Settled: whatever each connection allocated on open is resident by now.
    await new Promise((r) => setTimeout(r, 2000));
    if (process.env.BENCH_IDLE_TRACE === '1') {
      for (let s = 2; s <= num('BENCH_IDLE_TRACE_SECONDS', 20); s += 2) {
        console.log(`  t+${s}s RSS ${(rssBytes([gw.pid]) / MB).toFixed(1)} MB`);
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
    const open = rssBytes([gw.pid]);
    const redisOpen = redis ? rssBytes([redis.pid]) : 0;
    let settled: IdleResult['settled'] = null;
    if (settleSeconds > 0) {
      const waited = await settle(gw.pid, base, settleSeconds);
      settled = {
        seconds: waited,
        rssMb: rssBytes([gw.pid]) / MB,
        redisMb: redis ? rssBytes([redis.pid]) / MB : 0,
        // Still holding them: a reading of followers that were cut would be no reading at all.
        openFiles: fdRoom(gw.pid).open,
      };
      if (settled.openFiles < connections)
        console.warn(
          `idle ${store}: ${settled.openFiles} files open after ${waited} s idle, fewer than the ${connections} followers`,
        );
    }
    let held: Kinds | null = null;
    let probeOpen: ProbeLine | null = null;
    if (withProbe) {
      // A snapshot with the followers and one after they left: the difference is what they held.
      probeOpen = await probe(gw.pid, probeFile, true);
      await stopClients(clients);
      await new Promise((r) => setTimeout(r, 3000));
      const gone = await probe(gw.pid, probeFile, true);
      const withThem = heapByKind(probeOpen.snapshot!);
      const without = heapByKind(gone.snapshot!);
      held = new Map();
      for (const [kind, k] of withThem) {
        const b = without.get(kind) ?? { count: 0, bytes: 0 };
        held.set(kind, { count: k.count - b.count, bytes: k.bytes - b.bytes });
      }
    }
    const ok = connections - failed;
    return {
      store,
      connections: ok,
      failed,
      rssBeforeMb: before / MB,
      rssOpenMb: open / MB,
      redisBeforeMb: redisBefore / MB,
      redisOpenMb: redisOpen / MB,
      kbPerConnection: ok > 0 ? (open - before) / 1024 / ok : NaN,
      openSeconds,
      settled,
      probe: probeBefore && probeOpen && held ? { before: probeBefore, open: probeOpen, held } : null,
    };
  } finally {
    await stopClients(clients);
    await gw?.stop();
    await redis?.stop();
    await sim.stop();
    if (probeFile && process.env.BENCH_IDLE_KEEP_SNAPSHOTS === '1')
      console.log(`heap snapshots kept: ${probeFile}.*.heapsnapshot (open in Chrome DevTools, Memory tab)`);
    else if (probeFile) {
      for (const f of readdirSync(tmpdir()))
        if (f.startsWith(probeFile.slice(tmpdir().length + 1))) rmSync(join(tmpdir(), f), { force: true });
    }
  }
};

/** Process RSS plus redis-server's, per follower (KB): right after the burst, or settled. */
const perFollowerKb = (r: IdleResult, when: 'open' | 'settled' = 'open'): number => {
  const mb =
    when === 'settled' && r.settled ? r.settled.rssMb + r.settled.redisMb : r.rssOpenMb + r.redisOpenMb;
  return (mb * 1024) / Math.max(1, r.connections);
};

const printRows = (rows: IdleResult[]): void =>
  console.table(
    rows.map((r) => ({
      store: r.store,
      connections: r.connections,
      failed: r.failed,
      'RSS before MB': r.rssBeforeMb.toFixed(0),
      'RSS open MB': r.rssOpenMb.toFixed(0),
      'redis MB': r.store === 'redis' ? r.redisOpenMb.toFixed(0) : '–',
      'marginal KB/conn': r.kbPerConnection.toFixed(1),
      'KB/follower (all)': perFollowerKb(r).toFixed(1),
      'open time s': r.openSeconds.toFixed(1),
      ...(r.settled
        ? {
            'settled after s': r.settled.seconds,
            'RSS settled MB': r.settled.rssMb.toFixed(0),
            'KB/follower settled (all)': perFollowerKb(r, 'settled').toFixed(1),
          }
        : {}),
    })),
  );

const KB = 1024;

/** Heap snapshot kinds by the part of the gateway (or Node) that holds them; the rest is unnamed. */
const PARTS: [string, RegExp][] = [
  [
    'socket (net.Socket, its stream states, TCP handle)',
    /^(object (Socket|TCP|WritableState)|synthetic Node \/ TCPSocketWrap)$/,
  ],
  [
    'Node HTTP parser and server state',
    /HTTPParser|HTTPServerAsyncResource|socketListenerWrap|native_bind|CleanupQueue/,
  ],
  [
    'request and response objects (Node, Hono)',
    /^object (ServerResponse|IncomingMessage|ReadableState|Request\$1|RequestHeaders|Headers|Context)$/,
  ],
  ['SSE transport (stream, wheel entries)', /^object (NodeSseStream|IdleEntry|LifetimeEnd)$/],
  [
    'hub subscriber and surface feed',
    /^object (Subscriber|LogFeed|ChannelListener|[A-Z]\w*Feed\w*|Promise)$/,
  ],
  ['closures and their contexts', /^(closure |object system \/ Context)/],
];

/** Where one follower's bytes go, per surface: the probe's figures and snapshots, per connection. */
const printBreakdown = (surface: Surface, r: IdleResult): void => {
  if (!r.probe) return;
  const { before, open, held } = r.probe;
  const n = Math.max(1, r.connections);
  const per = (bytes: number): string => (bytes / n).toFixed(0);
  const rss = (open.rssKb - before.rssKb) * KB;
  const committed = open.heapTotal - before.heapTotal;
  const external = open.external - before.external;
  console.log(
    `\n## ${surface}: bytes per idle follower (${r.connections.toLocaleString('en')}), after a full collection`,
  );
  console.table([
    {
      RSS: per(rss),
      'V8 heap live': per(open.heapUsed - before.heapUsed),
      'V8 heap committed': per(committed),
      'new space committed': per(open.spaces.new_space!.committed - before.spaces.new_space!.committed),
      'old space committed': per(open.spaces.old_space!.committed - before.spaces.old_space!.committed),
      'external (ArrayBuffers…)': per(external),
      'outside V8 (malloc: libuv, parsers, …)': per(rss - committed - external),
    },
  ]);
  const rows = [...held]
    .map(([kind, k]) => ({ kind, count: k.count / n, bytes: k.bytes / n }))
    .filter((k) => Math.abs(k.bytes) >= 8)
    .sort((a, b) => b.bytes - a.bytes);
  const total = [...held.values()].reduce((a, k) => a + k.bytes, 0) / n;
  // The same kinds by part of the gateway (names as the snapshot gives them).
  const parts: Record<string, number> = {};
  for (const [kind, k] of held) {
    const part = PARTS.find(([, re]) => re.test(kind))?.[0] ?? 'plain objects, arrays, closures, strings';
    parts[part] = (parts[part] ?? 0) + k.bytes / n;
  }
  console.table(
    Object.entries(parts)
      .sort((a, b) => b[1] - a[1])
      .map(([part, bytes]) => ({ part, 'bytes per follower': bytes.toFixed(0) })),
  );
  console.table(
    rows.slice(0, 40).map((k) => ({
      kind: k.kind,
      'per follower': k.count.toFixed(2),
      bytes: k.bytes.toFixed(0),
    })),
  );
  console.log(`heap snapshot: ${total.toFixed(0)} bytes per follower held (with them minus after they left)`);
};

export const benchIdle = async (opts: { redis: boolean }): Promise<Figure[]> => {
  const connections = num('BENCH_IDLE_CONNECTIONS', 10_000);
  const procs = num('BENCH_SCALE_CLIENTS', 4);
  const surfaces = (process.env.BENCH_IDLE_SURFACES ?? 'native,beeos,flue').split(',') as Surface[];
  const stores = (opts.redis ? (['embedded', 'redis'] as const) : (['embedded'] as const)).filter((s) =>
    (process.env.BENCH_IDLE_STORES ?? 'embedded,redis').split(',').includes(s),
  );

  if (process.env.BENCH_IDLE_BREAKDOWN === '1') {
    const n = num('BENCH_IDLE_BREAKDOWN_CONNECTIONS', 5_000);
    const breakdownStore = process.env.BENCH_IDLE_BREAKDOWN_STORE === 'redis' ? 'redis' : 'embedded';
    console.log(
      `\n# where an idle follower's bytes go: ${n.toLocaleString('en')} followers of one surface at a time, ` +
        `${breakdownStore} store, the gateway with memory-probe.mjs (core 0), ${procs} client processes (core 1)`,
    );
    for (const surface of surfaces) {
      const r = await measure(breakdownStore, n, procs, [surface], true);
      printRows([r]);
      printBreakdown(surface, r);
    }
    return [];
  }

  console.log(
    `\n# ${connections.toLocaleString('en')} idle SSE connections (${surfaces.join(', ')}: a share each) on one ` +
      `gateway process (core 0), ${procs} client processes (core 1); target RSS ≤ 300 MB`,
  );
  const rows: IdleResult[] = [];
  for (const store of stores) {
    try {
      rows.push(await measure(store, connections, procs, surfaces, false));
    } catch (err) {
      console.warn(`idle ${store}: ${(err as Error).message}`);
    }
  }
  printRows(rows);
  const figures: Figure[] = rows.map((r) => ({
    figure: `${connections.toLocaleString('en')} idle SSE connections, RSS (${r.store})`,
    target: '≤ 300 MB',
    measured: `${r.rssOpenMb.toFixed(0)} MB (${r.kbPerConnection.toFixed(1)} KB/conn${r.failed ? `, ${r.failed} failed` : ''})`,
    met: r.failed === 0 && r.rssOpenMb <= 300,
  }));

  const cap = process.env.BENCH_IDLE_CAP;
  if (cap === '0') return figures;
  const size = cap ? Number(cap) : 'cap';
  const settleSeconds = num('BENCH_IDLE_SETTLE_SECONDS', 240);
  console.log(
    `\n# idle SSE followers at the gateway's file cap (${surfaces.join(', ')}: a share each), ` +
      `per follower: process RSS + redis-server RSS, 2 s after the last opened and once settled (at most ${settleSeconds} s idle); ` +
      `target ≤ 12 KB`,
  );
  const capRows: IdleResult[] = [];
  for (const store of stores) {
    try {
      capRows.push(await measure(store, size, procs, surfaces, false, settleSeconds));
    } catch (err) {
      console.warn(`idle at the file cap ${store}: ${(err as Error).message}`);
    }
  }
  printRows(capRows);
  for (const r of capRows) {
    // Judged idle: what a replica holding these followers holds once the burst of connecting them
    // is over. Right after the burst is shown beside it (the headroom a host needs for the burst).
    const kb = perFollowerKb(r, 'settled');
    const redisPart = (mb: number): string =>
      r.store === 'redis' ? ` + redis-server ${mb.toFixed(0)} MB` : '';
    const idle = r.settled
      ? `${kb.toFixed(1)} KB settled after ${r.settled.seconds} s idle: ${r.connections.toLocaleString('en')} in ` +
        `${r.settled.rssMb.toFixed(0)} MB${redisPart(r.settled.redisMb)}; `
      : '';
    figures.push({
      figure: `idle SSE followers at the file cap, process RSS${r.store === 'redis' ? ' + Redis' : ''} per follower (${r.store})`,
      target: '≤ 12 KB',
      measured:
        `${idle}${perFollowerKb(r).toFixed(1)} KB 2 s after the last opened: ${r.rssOpenMb.toFixed(0)} MB${redisPart(r.redisOpenMb)} ` +
        `(marginal ${r.kbPerConnection.toFixed(1)} KB${r.failed ? `, ${r.failed} failed` : ''})`,
      met: r.failed === 0 && kb <= 12 && (!r.settled || r.settled.openFiles >= r.connections),
    });
  }
  return figures;
};
