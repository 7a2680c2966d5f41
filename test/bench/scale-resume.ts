/**
 * Resume storm: on Redis, 10,000 clients each 1,000 records behind reconnect at once with
 * their cursor, and the figure is the time from the storm's start until the last of them has the
 * head record (target ≤ 5 s). Two ways to resume: native SSE with `Last-Event-ID` (the client holds
 * the stream open afterwards, as EventSource does) and the JSON long-poll `GET …/poll?after=`
 * (`limit=1000`, one page). The log is made by the simulated capsule through the real ingest path.
 * Gateway and redis-server on core 0, client processes on core 1, loopback only.
 *
 * The clients are storm-client.c (built with the machine's C compiler; the Node clients of
 * scale-sse-clients.ts without one, or with BENCH_NODE_CLIENTS=1). The Node
 * clients spent 3.7-4.2 s of CPU per storm on their core, more than the gateway on its own, so they
 * set the figure; the C ones spend 0.7-1.0 s. A storm is still judged only when its clients had
 * room: with their core at 90 % or more, the row says so instead of a verdict (as the fan-out bench
 * flags a saturated client core). Handshakes the kernel dropped because the accept queue was full
 * (its size is capped by `net.core.somaxconn`, printed with the table) are reported beside the
 * time: each costs its client a TCP retransmit of a second or more.
 *
 * `npm run bench -- resume`. Env: BENCH_RESUME_CLIENTS (10000), BENCH_RESUME_BEHIND (1000),
 * BENCH_SCALE_CLIENTS (client processes, 4).
 */
import { startSimulator } from '../../src/simulator/index.js';
import { nowMs } from './fanout-event.js';
import { CLIENT_CORE, coreLoad, coreTicks, cpuUs, rssBytes, SERVER_CORE } from './fanout-procs.js';
import { MB, startBenchGateway, startBenchRedis, until } from './scale-gateway.js';
import { errorSummary } from './scale-setup.js';
import { stormDriver } from './storm-drivers.js';
import type { Figure } from './scale-summary.js';
import { num } from './bench-env.js';
import { kernelBacklogCap } from '../../src/http/listen-backlog.js';
import { handshakeCounters, handshakeDelta, type HandshakeCounters } from './tcp-counters.js';

interface StormResult {
  via: string;
  clients: number;
  failed: number;
  seconds: number;
  peakRssMb: number;
  /** The gateway's CPU seconds over the storm (redis-server's apart), and the client processes'. */
  gatewayCpuS: number;
  clientsCpuS: number;
  /** Busy share of each core over the storm: a saturated client core means the clients are measured. */
  serverCore: number;
  clientCore: number;
  handshakes: HandshakeCounters;
}

/** Why a storm is not judged (its clients set the pace), or null. Same bound as the fan-out bench. */
const stormFlag = (r: StormResult): string | null =>
  r.clientCore >= 0.9 ? `clients saturated (core ${Math.round(r.clientCore * 100)} %)` : null;

const head = async (base: string): Promise<number> => {
  const res = await fetch(`${base}/murmur/storm/poll?after=0&limit=1`);
  return ((await res.json()) as { head: number }).head;
};

export const benchResume = async (opts: { redis: boolean }): Promise<Figure[]> => {
  const total = num('BENCH_RESUME_CLIENTS', 10_000);
  const behind = num('BENCH_RESUME_BEHIND', 1000);
  const procs = num('BENCH_SCALE_CLIENTS', 4);
  console.log(
    `\n# resume storm on Redis: ${total.toLocaleString('en')} clients ${behind.toLocaleString('en')} records ` +
      `behind reconnect at once (gateway + redis on core 0, ${procs} client processes on core 1); target ≤ 5 s`,
  );
  if (!opts.redis) {
    console.log('skipped: redis-server is not installed');
    return [{ figure: 'resume storm', target: '≤ 5 s', measured: 'skipped (no redis-server)', met: null }];
  }
  const sim = await startSimulator({ heartbeatMs: 15_000, bufferSize: 4096 });
  const redis = await startBenchRedis();
  const rows: StormResult[] = [];
  let driverKind = '';
  try {
    // The log: a burst through the real ingest path, then a fresh gateway process per way of
    // resuming (what one storm leaves in the heap must not count against the next).
    let gw = await startBenchGateway({ capsules: [{ id: 'storm', url: sim.url }] }, redis.url);
    await until(async () => sim.watchers > 0, 30_000, 'the gateway watching the capsule');
    await sim.submit(`#sim {"chunks":${behind + 200},"burst":true}`).done;
    // Ingested when the head stops moving (offsets start above a time floor: no count to wait for).
    let last = -1;
    await until(
      async () => {
        const h = await head(gw.baseUrl);
        const still = h === last;
        last = h;
        return still;
      },
      60_000,
      'the burst in the log',
    );
    await gw.stop();
    for (const way of ['native SSE, Last-Event-ID', `poll ?after (limit ${behind})`]) {
      gw = await startBenchGateway({ capsules: [{ id: 'storm', url: sim.url }] }, redis.url);
      const base = gw.baseUrl;
      const clients = await stormDriver(CLIENT_CORE, procs, total);
      if (!driverKind) console.log(`storm clients: ${(driverKind = clients.kind)}`);
      let peak = 0;
      const sampler = setInterval(() => (peak = Math.max(peak, rssBytes([gw.pid]))), 100);
      try {
        await until(async () => sim.watchers > 0, 30_000, 'the gateway watching the capsule');
        await new Promise((r) => setTimeout(r, 1000));
        const h = await head(base);
        const cursor = h - behind;
        const sse = way.startsWith('native');
        const target = sse
          ? { url: `${base}/murmur/storm/events`, headers: { 'last-event-id': String(cursor) } }
          : { url: `${base}/murmur/storm/poll?after=${cursor}&limit=${behind}` };
        const marker = sse ? `id: ${h}\n` : `"next_cursor":${h}`;
        await clients.prepare(target, marker, 120_000);
        const cpu0 = cpuUs([gw.pid]);
        const clientPids = clients.pids;
        const clientsCpu0 = cpuUs(clientPids);
        const server0 = coreTicks(SERVER_CORE);
        const client0 = coreTicks(CLIENT_CORE);
        const tcp0 = handshakeCounters();
        const t0 = nowMs();
        const answers = await clients.go();
        const gatewayCpuS = (cpuUs([gw.pid]) - cpu0) / 1e6;
        const clientsCpuS = (cpuUs(clientPids) - clientsCpu0) / 1e6;
        const serverCore = coreLoad(server0, coreTicks(SERVER_CORE));
        const clientCore = coreLoad(client0, coreTicks(CLIENT_CORE));
        const handshakes = handshakeDelta(tcp0, handshakeCounters());
        const failed = answers.reduce((a, r) => a + r.failed, 0);
        if (failed) console.warn(`resume ${way}: ${failed} failed (${errorSummary(answers)})`);
        rows.push({
          via: way,
          clients: total - failed,
          failed,
          seconds: (Math.max(...answers.map((a) => a.last)) - t0) / 1000,
          peakRssMb: peak / MB,
          gatewayCpuS,
          clientsCpuS,
          serverCore,
          clientCore,
          handshakes,
        });
      } finally {
        clearInterval(sampler);
        await clients.stop();
        await gw.stop();
      }
    }
  } finally {
    await redis.stop();
    await sim.stop();
  }
  console.table(
    rows.map((r) => ({
      'resume via': r.via,
      'caught up': r.clients,
      failed: r.failed,
      'all caught up s': r.seconds.toFixed(2),
      'gateway peak RSS MB': r.peakRssMb.toFixed(0),
      'gateway CPU s': r.gatewayCpuS.toFixed(2),
      'clients CPU s': r.clientsCpuS.toFixed(2),
      'server core busy': `${(r.serverCore * 100).toFixed(0)} %`,
      'client core busy': `${(r.clientCore * 100).toFixed(0)} %`,
      'handshakes dropped (accept queue full)': r.handshakes.listenOverflows,
      'SYN retransmits': r.handshakes.synRetransmits,
      'zero windows (clients not reading)': r.handshakes.zeroWindows,
      target: '≤ 5 s',
    })),
  );
  console.log(
    `net.core.somaxconn = ${kernelBacklogCap() ?? 'unknown'} (caps the gateway's accept backlog; counters are this host's, ` +
      'so other traffic during the storm counts too)',
  );
  return rows.map((r) => {
    const flag = stormFlag(r);
    const notes = [
      r.failed ? `${r.failed} failed` : '',
      r.handshakes.listenOverflows ? `${r.handshakes.listenOverflows} handshakes dropped by the kernel` : '',
      flag ? `flagged: ${flag}` : '',
    ].filter(Boolean);
    return {
      figure: `resume storm ${total.toLocaleString('en')} × ${behind.toLocaleString('en')} behind, Redis (${r.via})`,
      target: '≤ 5 s',
      measured: `${r.seconds.toFixed(2)} s${notes.length ? ` (${notes.join('; ')})` : ''}`,
      met: flag ? null : r.failed === 0 && r.seconds <= 5,
    };
  });
};
