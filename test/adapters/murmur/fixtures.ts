/** Per-test gateway + simulator set-up for the Murmur surface tests, closed after each test. */
import { afterEach } from 'vitest';
import {
  startSimulator,
  type SimulatedCapsule,
  type SimulatorOptions,
} from '../../../src/simulator/index.js';
import type { LogRecord } from '../../../src/log/record.js';
import { uniqueCapsule } from '../../support/redis.js';
import { startMurmurGateway, type MurmurGateway, type MurmurGatewayOptions } from './harness.js';
import type { RawStream } from './raw-client.js';

export interface Setup {
  gw: MurmurGateway;
  sim: SimulatedCapsule;
  capsule: string;
}

export const ACK_STATELESS =
  'event: connection-ack\ndata: {"role":"observer","conversation_mode":"stateless"}';

/** Register the afterEach cleanup and return helpers bound to it. */
export const useGateways = () => {
  let cleanups: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const c of cleanups.reverse()) await c();
    cleanups = [];
  });

  const setup = async (
    simOpts: SimulatorOptions = {},
    gwOpts: Partial<MurmurGatewayOptions> = {},
  ): Promise<Setup> => {
    const sim = await startSimulator(simOpts);
    const capsule = uniqueCapsule('mur');
    const gw = await startMurmurGateway({ capsules: { [capsule]: sim.url }, ...gwOpts });
    cleanups.push(
      () => sim.stop(),
      () => gw.close(),
    );
    await waitForRecord(gw, capsule, (r) => r.kind === 'fact' && r.fact === 'upstream-connected');
    return { gw, sim, capsule };
  };

  const track = (s: RawStream): RawStream => {
    cleanups.push(() => s.close());
    return s;
  };

  /** Wait (on the log, never on a timer) until a record matching `pred` is logged; returns it. */
  const waitForRecord = async (
    gw: MurmurGateway,
    capsule: string,
    pred: (r: LogRecord) => boolean,
  ): Promise<LogRecord> => {
    let after = 0;
    for (let i = 0; i < 200; i++) {
      const { records } = await gw.core.waitAfter(capsule, after, 1000, 2000);
      for (const r of records) {
        if (pred(r)) return r;
        after = r.offset;
      }
    }
    throw new Error('record never logged');
  };

  const allRecords = async (gw: MurmurGateway, capsule: string): Promise<LogRecord[]> =>
    (await gw.core.read(capsule, 0, 10_000)).records;

  return { setup, track, waitForRecord, allRecords, cleanups: () => cleanups };
};

/**
 * What a watcher must read for these records, by the gateway contract: each frame with its offset
 * as id (none when the capsule wrote none), each possibly-missing fact as a gap naming the next offset.
 */
export const expectedBlocks = (records: readonly LogRecord[]): string[] => {
  const out: string[] = [];
  for (const r of records) {
    if (r.kind === 'frame' && r.event !== 'connection-ack')
      out.push(`${r.upstreamId === null ? '' : `id: ${r.offset}\n`}event: ${r.event}\ndata: ${r.data}`);
    if (r.kind === 'fact' && r.fact === 'frames-possibly-missing')
      out.push(`event: gap\ndata: {"first_available_id":${r.offset + 1},"reason":"${r.reason}"}`);
  }
  return out;
};
