/**
 * The per-listener byte bound on shared BeeOS projections: a stream past it is counted in
 * sseStats().overflows and leaves its projection at once (not when its unread bytes are finally let
 * go), resumes exactly with `since`; streams that come and go leave nothing behind: the feed's
 * listener count returns to 0 and the capsule's hub subscription closes with the last stream.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { beeosFeedStats } from '../../../adapters/beeos/channel-feeds.js';
import type { Envelope } from '../../../adapters/beeos/projection.js';
import { SSE_DEFAULTS, sseStats } from '../../../src/http/sse-transport.js';
import { startHarness } from './support/harness.js';
import type { Harness } from './support/harness.js';
import { expectStreamMatches, oracleOf, readWholeLog } from './support/oracle.js';
import { openSse } from './support/real-gateway.js';
import { readSse } from './support/sse-client.js';
import type { SseEvent } from './support/sse-client.js';

let h: Harness | undefined;
const endGraceMs = SSE_DEFAULTS.endGraceMs;
afterEach(async () => {
  SSE_DEFAULTS.endGraceMs = endGraceMs;
  await h?.close();
  h = undefined;
});

const api = (hh: Harness) => `${hh.baseUrl}/api/v1/agents/${hh.capsule}`;
const post = (url: string, body: unknown) =>
  fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
const isCompletedReply = (e: SseEvent): boolean => {
  if (e.event !== 'message') return false;
  const envelope = JSON.parse(e.data) as Envelope;
  return envelope.type === 'agent_reply' && envelope.state === 'completed';
};

describe('BeeOS stream bounds on the shared feed', () => {
  it('an overflowed stream is counted and leaves its projection at once; 50 streams come and go without a leak', async () => {
    // The transport lets an ended stream's unread bytes go only after this grace: long enough that
    // only leaving the projection on overflow (not on the final close) can empty it here.
    SSE_DEFAULTS.endGraceMs = 600_000;
    const hh = (h = await startHarness({ maxQueuedBytes: 64 * 1024 }));
    const created = await post(`${api(hh)}/conversations`, {});
    const id = ((await created.json()) as { data: { conversation_id: string } }).data.conversation_id;
    const url = `${api(hh)}/conversations/${id}/events`;

    const witness = await openSse(url);
    const opened = await witness.until((e) => e.event === 'replay_complete');
    // The stalled client: its response is open but nothing reads it.
    const ac = new AbortController();
    const stalled = await fetch(url, { signal: ac.signal });
    await vi.waitFor(() => expect(beeosFeedStats(hh.capsule).listeners).toBe(2));
    const overflows = sseStats().overflows;

    expect(
      (await post(`${api(hh)}/conversations/${id}/messages`, { message: '#script {"chunks":2500}' })).status,
    ).toBe(202);
    const live = await witness.until(isCompletedReply);
    // Every write to the stalled client happened in the dispatches the witness has read.
    expect(sseStats().overflows).toBe(overflows + 1);
    expect(beeosFeedStats(hh.capsule)).toMatchObject({ feeds: 1, projections: 1, listeners: 1 });

    // The stalled client gets what was written before the bound, no end, then resumes exactly.
    const first: SseEvent[] = [];
    for await (const ev of readSse(stalled)) first.push(ev);
    expect(first.some((e) => e.event === 'end')).toBe(false);
    const got = first.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as Envelope);
    const since = got.at(-1)?.offset ?? 0;
    const resumed = await openSse(`${url}?since=${since}`);
    const rest = await resumed.until(isCompletedReply);

    // 50 streams connect and leave (each joined first; since: the replay writes nothing).
    const latest = (JSON.parse(live.at(-1)?.data ?? '{}') as Envelope).offset;
    for (let i = 0; i < 50; i++) {
      const s = await openSse(`${url}?since=${latest}`);
      await s.until((e) => e.event === 'replay_complete');
      s.close();
    }
    await vi.waitFor(() => expect(beeosFeedStats(hh.capsule).listeners).toBe(2));
    expect((await fetch(`${api(hh)}/conversations/${id}`, { method: 'DELETE' })).status).toBe(204);
    const witnessTail = await witness.rest();
    const resumedTail = await resumed.rest();
    // The last streams ended: no listener, no projection, no feed, no hub subscription.
    await vi.waitFor(() =>
      expect(beeosFeedStats(hh.capsule)).toMatchObject({
        feeds: 0,
        subscriptions: 0,
        projections: 0,
        listeners: 0,
        replaying: 0,
      }),
    );
    await vi.waitFor(() => expect(hh.hub.capsuleStats(hh.capsule).subscribers).toBe(0));

    const oracle = oracleOf(await readWholeLog(hh.core, hh.capsule), hh.capsule, id);
    expectStreamMatches([...opened, ...live, ...witnessTail], oracle, 0, false);
    const envelopes = (events: SseEvent[]): Envelope[] =>
      events.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as Envelope);
    expect([...got, ...envelopes([...rest, ...resumedTail])]).toEqual(
      envelopes([...opened, ...live, ...witnessTail]),
    );
    expect(resumedTail.at(-1)?.event).toBe('end');
    ac.abort();
  });
});
