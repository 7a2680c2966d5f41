/**
 * `--discover-running`: a temp directory of running-capsule records and a real simulator (its pid is
 * this process). Only the record that is current (pid alive, start time matching, agent card reporting
 * the same session) is fronted; a stale record (dead pid) and one whose card disagrees are not; a
 * record that goes away takes its capsule with it.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sanitiseCapsuleName } from '../../src/fleet/discovery.js';
import { processStartMs } from '../../src/fleet/process-start.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { until as pollUntil } from '../support/deadlines.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

/** The shared poll (its deadline scaled to the machine's load) for a yes/no check. */
const until = async (check: () => Promise<boolean> | boolean, ms: number): Promise<void> => {
  await pollUntil(async () => ((await check()) ? true : undefined), ms);
};

describe('discovery of running capsules', () => {
  let dir: string;
  let sim: SimulatedCapsule;
  let gw: TestGateway;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mg-running-'));
    sim = await startSimulator();
    const start = await processStartMs(process.pid);
    const deadPid = spawnSync('true').pid!;
    const record = (file: string, fields: Record<string, unknown>) =>
      writeFileSync(join(dir, file), JSON.stringify(fields), { mode: 0o600 });
    const base = {
      url: sim.url,
      capsule_name: 'My Capsule!',
      capsule_version: '0.5.0',
      workdir: '/tmp',
      outlives_launcher: false,
      started_at: new Date().toISOString(),
    };
    record(`${sim.sessionId}.json`, {
      ...base,
      session_id: sim.sessionId,
      pid: process.pid,
      process_start: new Date(start!.ms).toISOString(),
    });
    record('ses_stale.json', {
      ...base,
      capsule_name: 'stale',
      session_id: 'ses_00000000000000000000000000000001',
      pid: deadPid,
      process_start: new Date(start!.ms).toISOString(),
    });
    record('ses_other.json', {
      ...base,
      capsule_name: 'impostor',
      session_id: 'ses_00000000000000000000000000000002',
      pid: process.pid,
      process_start: start!.ticks,
    });
    record('ses_reused.json', {
      ...base,
      capsule_name: 'reused',
      session_id: sim.sessionId,
      pid: process.pid,
      process_start: new Date(start!.ms - 3_600_000).toISOString(),
    });
    writeFileSync(join(dir, 'garbage.json'), '{not json');
    gw = await startTestGateway({
      capsules: {},
      extra: { fleet: { discoverRunning: dir } },
      tuning: { fleet: { discoveryRescanMs: 200 } },
    });
  });
  afterAll(async () => {
    await gw?.close();
    await sim?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('fronts only the valid record, under its sanitised name, and drops it when the record goes', async () => {
    await until(() => gw.core.hasCapsule('My-Capsule'), 5_000);
    // Every record was judged in the scan that added the valid one.
    expect(gw.core.capsuleIds()).toEqual(['My-Capsule']);
    const res = await fetch(`${gw.baseUrl}/murmur/My-Capsule/poll?after=0`);
    expect(res.status).toBe(200);
    await until(async () => {
      const { capsules } = (await (await fetch(`${gw.baseUrl}/capsules`)).json()) as {
        capsules: { id: string; upstream: string }[];
      };
      return capsules.some((c) => c.id === 'My-Capsule' && c.upstream === 'connected');
    }, 5_000);

    rmSync(join(dir, `${sim.sessionId}.json`));
    await until(() => !gw.core.hasCapsule('My-Capsule'), 5_000);
    expect((await fetch(`${gw.baseUrl}/murmur/My-Capsule/poll?after=0`)).status).toBe(404);
  });

  it('sanitises names to the id grammar', () => {
    expect(sanitiseCapsuleName('My Capsule!')).toBe('My-Capsule');
    expect(sanitiseCapsuleName('..x')).toBe('x');
    expect(sanitiseCapsuleName('???')).toBe('capsule');
    expect(sanitiseCapsuleName('a'.repeat(80))).toHaveLength(64);
  });
});
