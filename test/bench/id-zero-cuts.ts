/**
 * Id-0 frames lost to connection cuts (fault 4). A busy capsule (tasks back to back) is cut
 * 12 times, 0.3–0.7 s apart; every task's id-0 `working` frame written while the gateway was away is
 * lost for good (a replay from 0 never holds it). Reported: written id-0 frames missing from the log,
 * `id-zero-unreplayable` facts, per cut. Default ingestor settings, in-process simulator, memory store.
 *
 *   npx tsx test/bench/id-zero-cuts.ts            (CUTS=12 RUNS=3 to change)
 */
import { LogWriter } from '../../src/log/log-writer.js';
import { MemoryStore } from '../../src/log/memory-store.js';
import { startSimulator } from '../../src/simulator/index.js';
import { CapsuleIngestor } from '../../src/upstream/ingestor.js';
import { isFinalStatusOf } from '../upstream/log-vs-written.js';

const cuts = Number(process.env.CUTS ?? 12);
const runs = Number(process.env.RUNS ?? 3);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export const benchIdZeroCuts = async (): Promise<{ written: number; lost: number; facts: number }> => {
  const sim = await startSimulator({ taskAcceptance: 'queue', frameDelayMs: 5 });
  const store = new MemoryStore();
  const writer = new LogWriter(store);
  const capsule = 'idzero';
  const ingestor = new CapsuleIngestor({ capsule, url: sim.url, writer, store });
  ingestor.start();
  while ((await store.read(capsule, 0, 1)).records.length === 0) await sleep(10);
  let done = false;
  const producer = (async () => {
    while (!done) await sim.submit('#sim {"chunks":3,"delayMs":5}').done;
  })();
  await sleep(300);
  const from = sim.written.length;
  for (let i = 0; i < cuts; i++) {
    await sleep(300 + Math.random() * 400);
    sim.cutConnections();
  }
  await sleep(700);
  done = true;
  await producer;
  // Settle: one last task after reconnecting, then everything durable.
  const last = sim.submit('#sim {"chunks":1}');
  await last.done;
  for (let i = 0; i < 500; i++) {
    const { records } = await store.read(capsule, 0, 1_000_000);
    if (records.some((r) => isFinalStatusOf(r, last.taskId))) break;
    await sleep(20);
  }
  await writer.flush();
  const { records } = await store.read(capsule, 0, 1_000_000);
  await ingestor.stop();
  await writer.close();
  await sim.stop();
  const logged = new Set(
    records.flatMap((r) => (r.kind === 'frame' && r.upstreamId === '0' ? [r.data] : [])),
  );
  const zeros = sim.written.slice(from).filter((w) => w.id === '0');
  const lost = zeros.filter((w) => !logged.has(w.data)).length;
  const facts = records.filter(
    (r) => r.kind === 'fact' && r.fact === 'frames-possibly-missing' && r.reason === 'id-zero-unreplayable',
  ).length;
  return { written: zeros.length, lost, facts };
};

const main = async (): Promise<void> => {
  const rows = [];
  for (let i = 0; i < runs; i++) {
    const r = await benchIdZeroCuts();
    rows.push({ ...r, cuts, lostPerCut: +(r.lost / cuts).toFixed(2) });
  }
  console.table(rows);
};

if (import.meta.url === `file://${process.argv[1]}`) {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
