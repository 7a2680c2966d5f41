/**
 * Test harness for ingestion: a simulator, a store, a writer and an ingestor wired together, with
 * event-driven waits (ingestor state, frames written by the capsule, records reaching the log).
 */
import { scaled } from '../support/deadlines.js';
import { EventEmitter, once } from 'node:events';
import { LogWriter, type LogWriterOptions } from '../../src/log/log-writer.js';
import type { LogRecord } from '../../src/log/record.js';
import type { LogStore } from '../../src/log/store.js';
import type { SimulatedCapsule, WrittenFrame } from '../../src/simulator/index.js';
import { CapsuleIngestor, type IngestorOptions, type IngestorState } from '../../src/upstream/ingestor.js';

export interface Rig {
  ingestor: CapsuleIngestor;
  writer: LogWriter;
  /** Resolves when the ingestor is (or next becomes) connected (its ack was read). */
  connected(): Promise<void>;
  /** Resolves when the ingestor has connected again after `reconnects` reconnections. */
  reconnectedAfter(reconnects: number): Promise<void>;
  /** Resolves when the ingestor's state first matches `pred` (now or later). */
  until(pred: (s: IngestorState) => boolean): Promise<IngestorState>;
  stop(): Promise<void>;
}

export interface RigOptions {
  doorToken?: string | null;
  /** Connect here instead of the simulator (a proxy in between). */
  url?: string;
  writer?: LogWriterOptions;
  ingestor?: Partial<IngestorOptions>;
}

/** Start an ingestor for `sim` into `store` with fast backoff for tests. */
export const startRig = (
  sim: SimulatedCapsule,
  store: LogStore,
  capsule: string,
  options: RigOptions | string | null = {},
): Rig => {
  const opts: RigOptions = typeof options === 'string' || options === null ? { doorToken: options } : options;
  const states = new EventEmitter();
  states.setMaxListeners(0);
  const writer = new LogWriter(store, opts.writer);
  const ingestor = new CapsuleIngestor({
    capsule,
    url: opts.url ?? sim.url,
    doorToken: opts.doorToken ?? null,
    writer,
    store,
    backoffBaseMs: 10,
    backoffCapMs: 100,
    replayQuietMs: 20,
    replayMaxMs: 100,
    ...opts.ingestor,
    onState: (s: IngestorState) => states.emit('state', s),
  });
  ingestor.start();
  return {
    ingestor,
    writer,
    connected: async () => {
      if (ingestor.state().state !== 'connected') {
        for (let i = 0; i < 10_000; i++) {
          const [s] = (await once(states, 'state')) as [IngestorState];
          if (s.state === 'connected') break;
        }
      }
    },
    reconnectedAfter: async (reconnects) => {
      for (let i = 0; i < 10_000; i++) {
        const s = ingestor.state();
        if (s.state === 'connected' && s.reconnects > reconnects) return;
        await once(states, 'state');
      }
    },
    until: async (pred) => {
      for (let s = ingestor.state(); ; [s] = (await once(states, 'state')) as [IngestorState]) {
        if (pred(s)) return s;
      }
    },
    stop: async () => {
      await ingestor.stop();
      await writer.flush();
      await writer.close();
    },
  };
};

/** Resolve once the capsule has written `n` more frames. */
export const afterWrites = (sim: SimulatedCapsule, n: number): Promise<void> =>
  new Promise((resolve) => {
    let seen = 0;
    const on = (_w: WrittenFrame): void => {
      if (++seen >= n) {
        sim.off('written', on);
        resolve();
      }
    };
    sim.on('written', on);
  });

/**
 * Cut the capsule's connections `times` times while it writes, each after 1 to 40 more frames (a
 * random point in the stream), waiting for the ingestor to reconnect before the next cut.
 */
export const cutWhileWriting = async (sim: SimulatedCapsule, rig: Rig, times: number): Promise<void> => {
  for (let cut = 0; cut < times; cut++) {
    const before = rig.ingestor.state().reconnects;
    await afterWrites(sim, 1 + Math.floor(Math.random() * 40));
    sim.cutConnections();
    await rig.reconnectedAfter(before);
  }
};

/** Wait (bounded) until a record matching `pred` is in the log; returns it. */
export const waitForRecord = async (
  store: LogStore,
  capsule: string,
  pred: (r: LogRecord) => boolean,
  timeoutMs = 15_000,
): Promise<LogRecord> => {
  const deadline = Date.now() + scaled(timeoutMs);
  let after = 0;
  while (Date.now() < deadline) {
    const { records } = await store.waitAfter(capsule, after, 1000, Math.max(1, deadline - Date.now()));
    for (const r of records) if (pred(r)) return r;
    if (records.length > 0) after = records[records.length - 1]!.offset;
  }
  throw new Error(`no matching record in ${capsule} within ${scaled(timeoutMs)} ms`);
};

/** Run a last task and wait until its final status is logged: everything before it is in the log. */
export const settle = async (
  sim: SimulatedCapsule,
  store: LogStore,
  capsule: string,
  rig: Rig,
): Promise<void> => {
  await sim.idle();
  await rig.connected();
  const h = sim.submit(`sentinel ${Math.random()}`);
  await h.done;
  await waitForRecord(
    store,
    capsule,
    (r) =>
      r.kind === 'frame' &&
      r.data.includes(h.taskId) &&
      r.data.includes('"final":true') &&
      r.event === 'status',
  );
  await rig.writer.flush();
};
