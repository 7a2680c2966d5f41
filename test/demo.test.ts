/**
 * A fresh demo shows no loss that did not happen: the demo controls both ends, so its gateway watches
 * every capsule before their workloads start, and no capsule's log begins with a `cold-attach` (or
 * any) "frames possibly missing" fact. Checked on every release line, through the native stream a
 * newcomer opens first and through /capsules, which the dashboard's "possibly missing" column reads.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Demo } from '../src/demo.js';
import { startDemoGateway, type DemoGateway } from './support/demo-gateway.js';
import type { TestGateway } from './support/gateway.js';
import { sseIds, sseTextUntil } from './support/sse-text.js';

let running: DemoGateway;
let demo: Demo;
let gw: TestGateway;

beforeAll(async () => {
  running = await startDemoGateway();
  ({ demo, gw } = running);
}, 60_000);
afterAll(() => running?.close());

/** A capsule's native stream from its start until `frames` frames with ids were read. */
const nativeStart = (capsule: string, frames: number): Promise<string> =>
  sseTextUntil(`${gw.baseUrl}/murmur/${capsule}/events`, (t) => sseIds(t).length >= frames);

describe('a fresh demo', () => {
  it('begins every capsule stream without a gap, and no capsule counts frames possibly missing', async () => {
    const ids = demo.capsules.map((c) => c.id);
    // Each capsule's first task has written frames by now (the workload's first task is ~10 frames).
    const streams = await Promise.all(ids.map((id) => nativeStart(id, 8)));
    for (const [i, text] of streams.entries()) {
      expect(text, ids[i]).toMatch(/^event: connection-ack\n/);
      expect(text, ids[i]).not.toMatch(/^event: gap$/m);
    }
    for (const id of ids) {
      const { records } = await gw.gateway.store.read(id, 0, 1000);
      expect(records.length, id).toBeGreaterThan(8);
      const missing = records.filter((r) => r.kind === 'fact' && r.fact === 'frames-possibly-missing');
      expect(missing, id).toEqual([]);
    }
    const fleet = (await (await fetch(`${gw.baseUrl}/capsules`)).json()) as {
      capsules: { id: string; frames_possibly_missing: number }[];
    };
    expect(fleet.capsules.map((c) => [c.id, c.frames_possibly_missing])).toEqual(ids.map((id) => [id, 0]));
  });
});
