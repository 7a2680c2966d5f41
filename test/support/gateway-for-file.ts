/**
 * One simulated capsule behind a test gateway for a whole test file: started before its first test,
 * stopped after its last. `sim` and `gw` are set once the file's tests run.
 */
import { afterAll, beforeAll } from 'vitest';
import { startSimulator, type SimulatedCapsule, type SimulatorOptions } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway, type TestGatewayOptions } from './gateway.js';

export interface FileGateway {
  sim: SimulatedCapsule;
  gw: TestGateway;
}

export const gatewayForFile = (
  opts: {
    capsule?: string;
    simulator?: SimulatorOptions;
    gateway?: Omit<TestGatewayOptions, 'capsules'>;
  } = {},
): FileGateway => {
  const rig = {} as Partial<FileGateway>;
  beforeAll(async () => {
    rig.sim = await startSimulator(opts.simulator);
    rig.gw = await startTestGateway({ ...opts.gateway, capsules: { [opts.capsule ?? 'cap']: rig.sim.url } });
  });
  afterAll(async () => {
    await rig.gw?.close();
    await rig.sim?.stop();
  });
  return rig as FileGateway;
};
