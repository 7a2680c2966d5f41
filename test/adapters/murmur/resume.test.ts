/**
 * Resume: an EventSource client and a raw client watch a busy simulated capsule through a proxy that
 * cuts their connections again and again; every frame the gateway logged arrives exactly once, in
 * order (gateway offsets as ids make Last-Event-ID exact).
 */
import { EventSource } from 'eventsource';
import { describe, expect, it } from 'vitest';
import { startCutProxy } from './cut-proxy.js';
import { useGateways } from './fixtures.js';
import { openRaw, type RawStream } from './raw-client.js';

const { setup, cleanups, waitForRecord } = useGateways();

const CUTS = 24;
const FRAME_EVENTS = ['status', 'artifact', 'text', 'thinking'];

/** The EventSource client: its fetch prepends `retry: 5` so reconnects come quickly (a client setting). */
const quickRetryFetch: typeof fetch = async (input, init) => {
  const res = await fetch(input, init);
  if (!res.body) return res;
  const prefix = new TextEncoder().encode('retry: 5\n\n');
  const body = res.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      start: (c) => c.enqueue(prefix),
    }),
  );
  return new Response(body, { status: res.status, headers: res.headers });
};

/** A raw client that reconnects with the last complete frame's id until stopped. */
const rawResumer = (url: string) => {
  const ids: number[] = [];
  let last: string | null = null;
  let current: RawStream | null = null;
  let stopped = false;
  let connects = 0;
  const loop = async (): Promise<void> => {
    for (let i = 0; i < 10_000 && !stopped; i++) {
      connects++;
      const s = await openRaw(url, { headers: last === null ? {} : { 'Last-Event-ID': last } }).catch(
        () => null,
      );
      if (!s) continue;
      current = s;
      let seen = 0;
      const take = (): void => {
        const frames = s.frames();
        for (; seen < frames.length; seen++) {
          const f = frames[seen]!;
          if (f.id !== null) {
            ids.push(Number(f.id));
            last = f.id;
          }
        }
      };
      const takeAll = (): boolean => {
        take();
        return false;
      };
      await s.waitFor(takeAll, 'the end of this connection', 600_000).catch(() => take());
    }
  };
  const done = loop();
  return {
    ids,
    connects: () => connects,
    stop: async () => {
      stopped = true;
      current?.close();
      await done;
    },
  };
};

describe('murmur surface: resume through cut connections', () => {
  it('delivers every logged frame exactly once, in order, to EventSource and raw clients', async () => {
    const { gw, sim, capsule } = await setup({ taskAcceptance: 'queue' });
    const port = Number(new URL(gw.baseUrl).port);
    const proxy = await startCutProxy(port);
    cleanups().push(() => proxy.close());
    const url = `${proxy.url}/murmur/${capsule}/events`;

    const esIds: number[] = [];
    const es = new EventSource(url, { fetch: quickRetryFetch });
    cleanups().push(() => es.close());
    for (const type of FRAME_EVENTS)
      es.addEventListener(type, (e: MessageEvent) => esIds.push(Number(e.lastEventId)));
    let esOpens = 0;
    es.addEventListener('open', () => esOpens++);
    const raw = rawResumer(url);
    cleanups().push(() => raw.stop());

    // Keep the capsule busy and cut both clients' connections mid-task, again and again.
    let cuts = 0;
    for (let i = 0; i < CUTS * 4 && cuts < CUTS; i++) {
      const task = sim.submit(`#sim {"chunks":12,"thinking":2,"tools":1,"delayMs":1}`);
      // Both clients are back (reconnected through the proxy) before each cut, so every cut counts.
      await proxy.waitForConnections(2);
      await new Promise((r) => setTimeout(r, 5 + Math.floor(Math.random() * 20))); // paces the load only
      if (proxy.cutAll() >= 2) cuts++;
      await task.done;
    }
    await sim.idle();
    expect(cuts).toBeGreaterThanOrEqual(20);

    // Every frame the capsule wrote is logged before the expectation is taken from the log.
    const lastWritten = sim.written[sim.written.length - 1]!;
    await waitForRecord(
      gw,
      capsule,
      (r) => r.kind === 'frame' && r.data === lastWritten.data && r.upstreamId === lastWritten.id,
    );
    const { records, position } = await gw.core.read(capsule, 0, 100_000);
    expect(records.filter((r) => r.kind === 'frame').length).toBe(sim.written.length);
    const want = records.filter((r) => r.kind === 'frame' && r.upstreamId !== null).map((r) => r.offset);
    const lastId = want[want.length - 1]!;
    expect(position.head).toBeGreaterThanOrEqual(lastId);
    // Wait (bounded) until both clients have the last logged frame.
    for (let i = 0; i < 400 && !(esIds.includes(lastId) && raw.ids.includes(lastId)); i++)
      await new Promise((r) => setTimeout(r, 25));
    const dups = (ids: number[]): number[] => ids.filter((id, i) => ids.indexOf(id) !== i);
    expect(dups(esIds), 'EventSource duplicates').toEqual([]);
    expect(dups(raw.ids), 'raw duplicates').toEqual([]);
    expect(esIds).toEqual(want);
    expect(raw.ids).toEqual(want);
    expect(esOpens).toBeGreaterThan(20);
    expect(raw.connects()).toBeGreaterThan(20);
  }, 60_000);
});
