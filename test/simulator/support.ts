/** Shared test setup: start simulators that are always stopped after each test. */
import { afterEach } from 'vitest';
import { startSimulator, type SimulatedCapsule, type SimulatorOptions } from '../../src/simulator/index.js';
import { post, rpc, type RawResponse } from './raw-client.js';

export const useSimulators = (): ((opts?: SimulatorOptions) => Promise<SimulatedCapsule>) => {
  const started: SimulatedCapsule[] = [];
  afterEach(async () => {
    await Promise.all(started.splice(0).map((c) => c.stop()));
  });
  return async (opts = {}) => {
    const c = await startSimulator(opts);
    started.push(c);
    return c;
  };
};

/** Open a stream/watch and wait for its connection-ack (it is live from then on). */
export const watch = async (port: number, headers: Record<string, string> = {}): Promise<RawResponse> => {
  const res = post(port, rpc('stream/watch'), headers);
  await res.waitFrames(1);
  return res;
};
