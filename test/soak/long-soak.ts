/**
 * `npm run soak -- --runs N [--seed S] [--seconds 150] [--capsules 3] [--release …] [--queue 128]`: the long
 * randomized soak (docs/soak.md). Several capsule processes behind cut proxies, one gateway process
 * on real Redis, a seeded schedule of faults, then every capsule's log checked frame by frame
 * against what its simulator wrote (soak-checks.ts). Exit status 1 when any run found a problem.
 */
import { SIM_RELEASES } from '../../src/simulator/index.js';
import { RedisStore } from '../../src/log/redis-store.js';
import { prng } from '../../src/simulator/workload.js';
import { freePort, startRedisServer } from '../support/redis-server.js';
import { forkCapsule, type CapsuleProcess } from './capsule-fleet.js';
import { gatewayProcess } from './gateway-process.js';
import { startPartitionProxy, type Heal, type PartitionProxy } from './partition-proxy.js';
import { writeFileSync, mkdirSync } from 'node:fs';
import { aroundLosses, aroundOffset, checkLog, checkReaders, waitForFinal } from './soak-checks.js';

const arg = (name: string, fallback: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
};
const runs = Number(arg('runs', '1'));
const firstSeed = Number(arg('seed', String(Date.now() % 1_000_000)));
const seconds = Number(arg('seconds', '150'));
const capsuleCount = Number(arg('capsules', '3'));
const release = arg('release', 'spec');
// A shorter live queue per connection than the spec's 128: the capsule drops runs from a reader behind more often.
const queue = Number(arg('queue', '128'));
if (![runs, firstSeed, seconds, capsuleCount, queue].every((n) => Number.isInteger(n) && n > 0)) {
  process.stderr.write(
    'usage: npm run soak -- --runs N [--seed S] [--seconds 150] [--capsules 3] [--release spec|0.4|0.5|0.6|1.0] [--queue 128]\n',
  );
  process.exit(2);
}
if (!(SIM_RELEASES as readonly string[]).includes(release)) {
  process.stderr.write(`soak: --release ${release}: one of ${SIM_RELEASES.join('|')}\n`);
  process.exit(2);
}

type FaultKind =
  'cut' | 'capsule-restart' | 'redis-stop' | 'gateway-kill' | 'burst' | 'partition' | 'store-partition';
interface Fault {
  at: number;
  kind: FaultKind;
  capsule: number;
  /** A partition's length (ms) and how it heals. */
  ms?: number;
  heal?: Heal;
}

/**
 * The run's schedule: about 18 cuts, 6 session restarts, 6 Redis stops, 2-7 kills, 6 bursts, 6
 * partitions of a capsule's upstream (1.5-5 s) and 3 of the gateway's store (1.5-4 s), each healing
 * by resuming or by dropping what it held. Partitions are drawn last, so the other faults of a seed
 * stay where they were before partitions existed.
 */
export const schedule = (seed: number, secs: number, capsules: number): Fault[] => {
  const rand = prng(seed);
  const count = (mean: number): number => Math.max(1, Math.round(mean * (0.8 + 0.4 * rand())));
  const out: Fault[] = [];
  const add = (kind: FaultKind, n: number): void => {
    for (let i = 0; i < n; i++)
      out.push({ at: (0.03 + 0.94 * rand()) * secs * 1000, kind, capsule: Math.floor(rand() * capsules) });
  };
  const scale = secs / 150;
  add('cut', count(18 * scale));
  add('capsule-restart', count(6 * scale));
  add('redis-stop', count(6 * scale));
  add('gateway-kill', Math.min(7, 2 + Math.floor(rand() * 6 * scale)));
  add('burst', count(6 * scale));
  const partitions = (kind: FaultKind, n: number, minMs: number, maxMs: number): void => {
    const from = out.length;
    add(kind, n);
    for (const f of out.slice(from)) {
      f.ms = Math.round(minMs + (maxMs - minMs) * rand());
      f.heal = rand() < 0.5 ? 'resume' : 'drop';
    }
  };
  partitions('partition', count(6 * scale), 1500, 5000);
  partitions('store-partition', count(3 * scale), 1500, 4000);
  return out.sort((a, b) => a.at - b.at);
};

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, Math.max(0, ms)));
const log = (line: string): void => void process.stdout.write(`${line}\n`);

const oneRun = async (seed: number): Promise<boolean> => {
  const faults = schedule(seed, seconds, capsuleCount);
  const redis = await startRedisServer();
  const capsules: CapsuleProcess[] = [];
  const proxies: PartitionProxy[] = [];
  for (let i = 0; i < capsuleCount; i++) {
    const c = await forkCapsule(release, queue);
    capsules.push(c);
    proxies.push(await startPartitionProxy(c.port));
  }
  // The gateway reaches Redis through a proxy too (store partitions); the checks below go direct.
  const storeProxy = await startPartitionProxy(Number(new URL(redis.url).port));
  const names = capsules.map((_, i) => `soak-${i}`);
  const gw = gatewayProcess(
    await freePort(),
    [
      '--redis',
      `redis://${storeProxy.address}`,
      ...names.flatMap((n, i) => ['--capsule', `${n}=http://${proxies[i]!.address}/`]),
    ],
    { REPLICA_ID: 'soak-1' },
  );
  const store = new RedisStore(redis.url, { commandTimeoutMs: 2000 });
  const done: Record<FaultKind, number> = {
    cut: 0,
    'capsule-restart': 0,
    'redis-stop': 0,
    'gateway-kill': 0,
    burst: 0,
    partition: 0,
    'store-partition': 0,
  };
  /** Partitions run beside the schedule, one at a time per proxy; what they held, by heal. */
  const partitioned = new Map<PartitionProxy, Promise<void>>();
  const held: Record<Heal, { n: number; ms: number }> = { resume: { n: 0, ms: 0 }, drop: { n: 0, ms: 0 } };
  const partition = (proxy: PartitionProxy, f: Fault): void => {
    const { ms = 2000, heal = 'resume' } = f;
    const next = (partitioned.get(proxy) ?? Promise.resolve()).then(async () => {
      await proxy.blackhole(ms, heal);
      done[f.kind]++;
      held[heal].n++;
      held[heal].ms += ms;
    });
    partitioned.set(proxy, next);
  };
  let ok = true;
  try {
    await gw.start();
    const t0 = Date.now();
    for (const f of faults) {
      await sleep(t0 + f.at - Date.now());
      switch (f.kind) {
        case 'cut':
          proxies[f.capsule]!.cutAll();
          break;
        case 'capsule-restart':
          await capsules[f.capsule]!.restart();
          break;
        case 'redis-stop':
          redis.pause();
          await sleep(2000);
          redis.resume();
          break;
        case 'gateway-kill':
          await gw.kill();
          await gw.start();
          break;
        case 'burst':
          await capsules[f.capsule]!.burst(400);
          break;
        case 'partition':
          partition(proxies[f.capsule]!, f);
          continue; // counted once healed
        case 'store-partition':
          partition(storeProxy, f);
          continue;
      }
      done[f.kind]++;
    }
    await sleep(t0 + seconds * 1000 - Date.now());
    await Promise.all(partitioned.values());
    for (let i = 0; i < capsuleCount; i++) {
      const last = await capsules[i]!.settle();
      if (!(await waitForFinal(store, names[i]!, last, 60_000))) {
        ok = false;
        log(`  ${names[i]}: the last task's final status never reached the log`);
      }
    }
    const faultLine = Object.entries(done)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ');
    const heals = (['resume', 'drop'] as const)
      .map(
        (h) => `${held[h].n} ${h === 'resume' ? 'resumed' : 'dropped'} (${(held[h].ms / 1000).toFixed(1)} s)`,
      )
      .join(', ');
    log(`seed ${seed}: ${seconds} s, faults: ${faultLine}; partitions healed: ${heals}`);
    for (let i = 0; i < capsuleCount; i++) {
      const check = await checkLog(store, names[i]!, await capsules[i]!.written());
      const readers = await checkReaders(gw.url, names[i]!, check.records);
      const problems = [...check.problems, ...readers];
      const missing =
        Object.entries(check.missingByKind)
          .map(([k, n]) => `${k}: ${n}`)
          .join(', ') || 'none';
      const facts: Record<string, number> = {};
      for (const r of check.records)
        if (r.kind === 'fact' && r.fact === 'frames-possibly-missing')
          facts[r.reason] = (facts[r.reason] ?? 0) + 1;
      const factLine =
        Object.entries(facts)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ') || 'none';
      log(
        `  ${names[i]}: written ${check.written}, logged ${check.matched}, missing ${missing}, loss facts ${factLine}, dropped by the capsule to a reader behind ${await capsules[i]!.dropped()}, problems ${problems.length}`,
      );
      if (problems.length > 0) {
        ok = false;
        for (const p of problems.slice(0, 20)) log(`    ${p}`);
        const where = /log offset (\d+)/.exec(problems[0] ?? '');
        if (where)
          log(
            `    log before and after offset ${where[1]}:\n${aroundOffset(check.records, Number(where[1]))}`,
          );
        log(
          aroundLosses(check.records)
            .split('\n')
            .slice(0, 40)
            .map((l) => `    | ${l}`)
            .join('\n'),
        );
      }
    }
  } catch (err) {
    ok = false;
    log(`seed ${seed}: run failed: ${String(err)}\n${gw.output.slice(-15).join('\n')}`);
  } finally {
    await gw.kill();
    await store.close();
    for (const p of proxies) await p.close();
    await storeProxy.close();
    for (const c of capsules) await c.stop();
    await redis.stop();
  }
  if (!ok) {
    // The gateway's own account (pino JSON across every restart) for whoever replays the seed.
    mkdirSync('.tmp', { recursive: true });
    writeFileSync(`.tmp/soak-${seed}-${process.pid}-gateway.log`, `${gw.output.join('\n')}\n`);
    log(`seed ${seed}: the gateway's output is in .tmp/soak-${seed}-${process.pid}-gateway.log`);
  }
  log(`seed ${seed}: ${ok ? 'exact' : 'FAILED'}`);
  return ok;
};

let failed = 0;
log(
  `soak: ${runs} run(s) from seed ${firstSeed}, ${seconds} s, ${capsuleCount} capsules, release ${release}, live queue ${queue}`,
);
for (let r = 0; r < runs; r++) if (!(await oneRun(firstSeed + r))) failed++;
log(`soak: ${runs - failed} of ${runs} run(s) exact`);
process.exit(failed > 0 ? 1 : 0);
