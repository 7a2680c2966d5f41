/**
 * 500 concurrent watchers on one capsule all receive the identical sequence (correctness, not
 * timing): one hub reader per capsule, bytes encoded once and shared by every connection.
 */
import { describe, expect, it } from 'vitest';
import { useGateways } from './fixtures.js';
import { rpcPost, WATCH, type RawStream } from './raw-client.js';

const { setup, track, waitForRecord } = useGateways();
const WATCHERS = 500;

describe('murmur surface: fan-out', () => {
  it(`gives ${WATCHERS} concurrent watchers identical sequences`, async () => {
    const { gw, sim, capsule } = await setup({ taskAcceptance: 'queue' });
    const watchers: RawStream[] = [];
    for (let i = 0; i < WATCHERS; i += 50) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(50, WATCHERS - i) }, () => rpcPost(gw.baseUrl, capsule, WATCH)),
      );
      for (const s of batch) watchers.push(track(s));
    }
    await Promise.all(watchers.map((s) => s.waitFor((x) => x.blocks().length >= 1, 'ack')));
    const tasks = [1, 2, 3].map((n) =>
      sim.submit(`#sim {"chunks":10,"thinking":2,"tools":2,"delayMs":1,"reply":"r${n}"}`),
    );
    await Promise.all(tasks.map((t) => t.done));
    const lastWritten = sim.written[sim.written.length - 1]!;
    const last = await waitForRecord(gw, capsule, (r) => r.kind === 'frame' && r.data === lastWritten.data);
    const lastLine = `id: ${last.offset}\n`;
    await Promise.all(
      watchers.map((s) => s.waitFor((x) => x.body().includes(lastLine), 'the last frame', 20_000)),
    );
    const reference = watchers[0]!.frames().map((f) => f.raw);
    expect(reference.filter((b) => b.startsWith('id: ')).length).toBe(sim.written.length);
    for (const s of watchers) expect(s.frames().map((f) => f.raw)).toEqual(reference);
  }, 60_000);
});
