/** The capsule stream through the real gateway over a simulated capsule: the log, byte for byte. */
import { describe, expect, it } from 'vitest';
import { formatEpochOffset as formatOffset } from '../../../src/http/epoch-offset.js';
import { recordJson } from '../../../src/http/record-json.js';
import { readSse } from '../beeos/support/sse-client.js';
import { useGateways } from '../murmur/fixtures.js';

const { setup, allRecords } = useGateways();

describe('capsule stream through the gateway', () => {
  it('serves every logged record, its tail offset, and 404 for an unknown capsule', async () => {
    const { gw, capsule } = await setup();
    const records = await allRecords(gw, capsule);
    const res = await fetch(`${gw.baseUrl}/v1/stream/murmur/${capsule}?offset=-1`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { offset: number }[];
    const { epoch } = await gw.core.position(capsule);
    const last = body[body.length - 1]!;
    expect(body.slice(0, records.length)).toEqual(records.map(recordJson));
    expect(res.headers.get('stream-next-offset')).toBe(formatOffset(epoch, last.offset));
    const unknown = await fetch(`${gw.baseUrl}/v1/stream/murmur/no-such-capsule`);
    expect(unknown.status).toBe(404);
    const put = await fetch(`${gw.baseUrl}/v1/stream/murmur/${capsule}`, { method: 'PUT' });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('GET, HEAD');
  });

  it('live=sse over the Node transport follows new records, and a draining gateway ends it', async () => {
    const { gw, sim, capsule } = await setup();
    const res = await fetch(`${gw.baseUrl}/v1/stream/murmur/${capsule}?offset=now&live=sse`);
    expect(res.status).toBe(200);
    const { epoch } = await gw.core.position(capsule);
    const seen: { offset: number }[] = [];
    let submitted = false;
    let drained = false;
    let lastControl: { streamNextOffset: string } | null = null;
    for await (const ev of readSse(res)) {
      if (ev.event === 'control') {
        lastControl = JSON.parse(ev.data) as { streamNextOffset: string };
        if (!submitted) {
          // Counted among the capsule's open downstream connections, under its own surface.
          const ops = (await (await fetch(`${gw.baseUrl}/capsules`)).json()) as {
            capsules: { id: string; connections: Record<string, number> }[];
          };
          expect(ops.capsules.find((c) => c.id === capsule)!.connections).toEqual({ 'durable-streams': 1 });
          submitted = true;
          sim.submit('#sim {"chunks":3}');
        }
      }
      if (ev.event === 'data') seen.push(...(JSON.parse(ev.data) as { offset: number }[]));
      if (!drained && seen.length >= 3) {
        drained = true;
        void gw.close();
      }
    }
    expect(drained).toBe(true);
    const logged = (await allRecords(gw, capsule)).filter((r) => r.offset <= seen.at(-1)!.offset);
    expect(seen).toEqual(logged.slice(logged.length - seen.length).map(recordJson));
    expect(lastControl!.streamNextOffset).toBe(formatOffset(epoch, seen.at(-1)!.offset));
  });
});
