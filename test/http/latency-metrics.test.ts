/**
 * The latency histograms on /metrics (gateway contract "Latency and tracing"): after a Flue message
 * and a BeeOS task reach the capsule through the queue and their replies are read live, each surface
 * has a hand-off, a first-frame and a delivery-lag count, labelled by surface and capsule class only.
 */
import { createFlueClient } from '@flue/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashApiKey } from '../support/api-keys.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, TEST_OPS_HEADERS, type TestGateway } from '../support/gateway.js';

const ALICE = `oag_${'c3'.repeat(32)}`;
/** A reply in a few paced frames, so a live reader is attached when they are appended. */
const paced = (reply: string): string => `#sim ${JSON.stringify({ reply, delayMs: 40, turns: 2 })}`;

/** `name{labels} value` samples of one metric from the Prometheus text. */
const samples = (text: string, name: string): { labels: Record<string, string>; value: number }[] =>
  text
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .map((line) => {
      const m = /^[^{ ]+(?:\{(.*)\})? (\S+)$/.exec(line)!;
      const labels = Object.fromEntries(
        [...(m[1] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]),
      );
      return { labels, value: Number(m[2]) };
    });

describe('latency histograms on /metrics', () => {
  let sim: SimulatedCapsule;
  let gw: TestGateway;
  beforeAll(async () => {
    sim = await startSimulator({ heartbeatMs: 200 });
    gw = await startTestGateway({
      capsules: { cap: sim.url },
      config: { apiKeys: [{ sha256: hashApiKey(ALICE), owner: 'alice' }] },
    });
  }, 30_000);
  afterAll(async () => {
    await gw?.close();
    await sim?.stop();
  });

  const metrics = async (): Promise<string> =>
    (await fetch(`${gw.baseUrl}/metrics`, { headers: TEST_OPS_HEADERS })).text();

  it('a Flue message and a BeeOS task each count a hand-off, a first frame and a live delivery', async () => {
    const flue = createFlueClient({ url: `${gw.baseUrl}/flue/cap/lat-conv`, token: ALICE });
    const sent = await flue.send({ message: { kind: 'user', body: paced('flue reply') } });
    await flue.wait(sent);

    const auth = { authorization: `Bearer ${ALICE}` };
    const created = await fetch(`${gw.baseUrl}/api/v1/agents/cap/tasks`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ message: paced('beeos reply') }),
    });
    expect(created.status).toBe(202);
    const task = ((await created.json()) as { data: { task_id: string } }).data.task_id;
    // Its events, live until the task ends (the stream closes then).
    const events = await fetch(`${gw.baseUrl}/api/v1/agents/cap/tasks/${task}/events`, {
      headers: auth,
      signal: AbortSignal.timeout(15_000),
    });
    expect(events.status).toBe(200);
    const body = await events.text();
    expect(body).toContain('beeos reply');

    const text = await metrics();
    for (const surface of ['flue', 'beeos']) {
      for (const name of [
        'murmur_gateway_submission_handoff_seconds_count',
        'murmur_gateway_time_to_first_frame_seconds_count',
      ]) {
        const rows = samples(text, name).filter((s) => s.labels.surface === surface);
        expect(rows, `${name} ${surface}`).toHaveLength(1);
        expect(rows[0]!.value, `${name} ${surface}`).toBe(1);
        // Surface and capsule class only: never a capsule, context or task id.
        expect(Object.keys(rows[0]!.labels).sort()).toEqual(['capsule_class', 'surface']);
        // The capsule class is its release line (the simulator speaks the spec's by default).
        expect(rows[0]!.labels.capsule_class).toBe('spec');
      }
      const lag = samples(text, 'murmur_gateway_delivery_lag_seconds_count').filter(
        (s) => s.labels.surface === surface,
      );
      expect(lag, `delivery lag ${surface}`).toHaveLength(1);
      expect(lag[0]!.value).toBeGreaterThan(0);
      expect(Object.keys(lag[0]!.labels)).toEqual(['surface']);
    }
    // Each histogram has its buckets (a millisecond to ten seconds) and a sum.
    expect(text).toContain('murmur_gateway_submission_handoff_seconds_bucket{le="0.025",surface="flue"');
    expect(samples(text, 'murmur_gateway_time_to_first_frame_seconds_sum').length).toBeGreaterThan(0);
  }, 30_000);
});
