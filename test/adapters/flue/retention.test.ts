/**
 * An updates offset whose following records were trimmed by retention: the deltas from it would
 * silently miss them, so every read mode answers 416 stream_offset_gone (the SDK restarts from -1),
 * never `200 []` with a new Stream-Next-Offset.
 */
import { describe, expect, it, vi } from 'vitest';
import { createFlueClient } from '@flue/sdk';
import { gatewayForFile } from '../../support/gateway-for-file.js';
import { expectError } from './rule-fixture.js';

const rig = gatewayForFile({
  gateway: { config: { longPollMaxMs: 5_000, retention: { maxRecords: 40, maxAgeMs: 0 } } },
});

describe('an updates offset older than retention', () => {
  it('→ 416 stream_offset_gone for plain, long-poll and SSE reads; -1 still reads what is retained', async () => {
    const url = `${rig.gw.baseUrl}/flue/cap/trimmed`;
    const client = createFlueClient({ url });
    await client.wait(await client.send({ message: { kind: 'user', body: 'first' } }));
    const offset = (await fetch(url, { method: 'HEAD' })).headers.get('stream-next-offset')!;
    const held = Number(offset.split('_')[1]);
    // The hub keeps recent records in memory while a capsule has readers, and answers from there
    // (trimmed or not: nothing is lost then). Let its channel dissolve so reads meet the store's trim.
    await vi.waitFor(() => expect(rig.gw.gateway.hub.capsuleStats('cap').tailLoop).toBe(false), {
      timeout: 15_000,
      interval: 50,
    });
    // More records than retention keeps: the records right after `held` are trimmed.
    while ((await rig.gw.core.position('cap')).first <= held + 1) await rig.sim.submit('more').done;
    for (const live of ['', '&live=long-poll', '&live=sse']) {
      await expectError(
        await fetch(`${url}?view=updates&offset=${offset}${live}`),
        416,
        'stream_offset_gone',
      );
    }
    const fresh = await fetch(`${url}?view=updates&offset=-1`);
    expect(fresh.status).toBe(200);
  }, 30_000);
});
