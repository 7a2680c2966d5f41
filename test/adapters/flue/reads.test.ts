/**
 * Flue routing, method and read rules (ids, 405s, 404s, query validation, 416, headers, long-poll,
 * SSE) with exact status and error type, against the whole gateway and a simulated capsule.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, startRuleFixture, type RuleFixture } from './rule-fixture.js';

let fx: RuleFixture;
let base: string;
let gw: RuleFixture['gw'];
const created = (conv: string) => fx.created(conv);

beforeAll(async () => {
  fx = await startRuleFixture();
  ({ base, gw } = fx);
});
afterAll(() => fx.close());

describe('routing, ids and methods', () => {
  it('unknown capsule → 404 stream_not_found on every route', async () => {
    await expectError(await fetch(`${gw.baseUrl}/flue/nope/c1`), 404, 'stream_not_found');
    await expectError(
      await fetch(`${gw.baseUrl}/flue/nope/c1`, { method: 'POST', body: '{}' }),
      404,
      'stream_not_found',
    );
    await expectError(
      await fetch(`${gw.baseUrl}/flue/nope/c1/abort`, { method: 'POST' }),
      404,
      'stream_not_found',
    );
  });

  it('empty or whitespace conversation id → 400 invalid_request', async () => {
    await expectError(await fetch(`${base}/%20%20`), 400, 'invalid_request');
    await expectError(await fetch(`${base}/`), 400, 'invalid_request');
    await expectError(await fetch(base), 400, 'invalid_request');
  });

  it('methods a route does not allow → 405 method_not_allowed with Allow', async () => {
    const put = await fetch(`${base}/c1`, { method: 'PUT' });
    expect(put.headers.get('allow')).toBe('GET, HEAD, POST');
    await expectError(put, 405, 'method_not_allowed');
    const abort = await fetch(`${base}/c1/abort`);
    expect(abort.headers.get('allow')).toBe('POST');
    await expectError(abort, 405, 'method_not_allowed');
    const att = await fetch(`${base}/c1/attachments/a1`, { method: 'DELETE' });
    expect(att.headers.get('allow')).toBe('GET');
    await expectError(att, 405, 'method_not_allowed');
  });
});

describe('reads', () => {
  it('a conversation that never received a message → 404 stream_not_found on every read route', async () => {
    await expectError(await fetch(`${base}/never`), 404, 'stream_not_found');
    await expectError(await fetch(`${base}/never?view=updates&offset=-1`), 404, 'stream_not_found');
    await expectError(await fetch(`${base}/never/attachments/x`), 404, 'stream_not_found');
    const head = await fetch(`${base}/never`, { method: 'HEAD' });
    expect(head.status).toBe(404);
    expect(head.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await head.text()).toBe('');
  });

  it('bad query combinations → 400 invalid_request', async () => {
    await created('q1');
    const bad = [
      'view=bogus',
      'view=history&view=history',
      'view=history&offset=-1',
      'offset=-1',
      'live=sse',
      'tail=5',
      'view=updates',
      'view=updates&offset=-1&offset=-1',
      'view=updates&offset=abc',
      'view=updates&offset=1',
      'view=updates&offset=0_0',
      'view=updates&offset=00000000000000001_0000000000000000',
      'view=updates&offset=-1&live=stream',
      'view=updates&offset=-1&live=sse&live=sse',
      'view=updates&offset=-1&tail=3',
    ];
    for (const q of bad) await expectError(await fetch(`${base}/q1?${q}`), 400, 'invalid_request');
  });

  it('an offset beyond the head or from another epoch → 416 stream_offset_gone', async () => {
    const admission = await created('q2');
    const [epoch] = admission.offset.split('_');
    await expectError(
      await fetch(`${base}/q2?view=updates&offset=${epoch}_9999999999999999`),
      416,
      'stream_offset_gone',
    );
    const other = String(Number(epoch) + 1).padStart(16, '0');
    await expectError(
      await fetch(`${base}/q2?view=updates&offset=${other}_0000000000000001`),
      416,
      'stream_offset_gone',
    );
  });

  it('history, HEAD and updates carry the spec headers; -1 begins with a conversation-reset', async () => {
    await created('q3');
    const history = await fetch(`${base}/q3`);
    expect(history.status).toBe(200);
    expect(history.headers.get('cache-control')).toBe('no-store');
    expect(history.headers.get('stream-up-to-date')).toBe('true');
    expect(history.headers.get('x-content-type-options')).toBe('nosniff');
    expect(history.headers.get('cross-origin-resource-policy')).toBe('cross-origin');
    const snap = (await history.json()) as { offset: string; v: number };
    expect(history.headers.get('stream-next-offset')).toBe(snap.offset);
    expect(snap.v).toBe(1);
    const head = await fetch(`${base}/q3`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toBe('application/json');
    expect(head.headers.get('stream-up-to-date')).toBe('true');
    expect(head.headers.get('stream-next-offset')).toMatch(/^\d{16}_\d{16}$/);
    const updates = await fetch(`${base}/q3?view=updates&offset=-1`);
    expect(updates.headers.get('cache-control')).toBe('no-store');
    const chunks = (await updates.json()) as { type: string }[];
    expect(chunks[0]?.type).toBe('conversation-reset');
    const att = await fetch(`${base}/q3/attachments/${encodeURIComponent('a/1')}`);
    await expectError(att, 404, 'attachment_not_found');
  });

  it('long-poll at the head answers [] up to date with the offset after the window', async () => {
    await created('q4');
    const snap = (await (await fetch(`${base}/q4`)).json()) as { offset: string };
    const res = await fetch(`${base}/q4?view=updates&offset=${snap.offset}&live=long-poll`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual([]);
    expect(res.headers.get('stream-up-to-date')).toBe('true');
    expect(res.headers.get('stream-next-offset')).toBe(snap.offset);
  });

  it('a parked long-poll whose client leaves does not disturb the next one', async () => {
    await created('q5');
    const snap = (await (await fetch(`${base}/q5`)).json()) as { offset: string };
    const gone = new AbortController();
    const parked = fetch(`${base}/q5?view=updates&offset=${snap.offset}&live=long-poll`, {
      signal: gone.signal,
    });
    gone.abort();
    await expect(parked).rejects.toThrow();
    const res = await fetch(`${base}/q5?view=updates&offset=${snap.offset}&live=long-poll`);
    expect(res.status).toBe(200);
  });

  it('SSE: headers, idle upToDate control and heartbeat comments', async () => {
    await created('q6');
    const snap = (await (await fetch(`${base}/q6`)).json()) as { offset: string };
    const stop = new AbortController();
    const res = await fetch(`${base}/q6?view=updates&offset=${snap.offset}&live=sse`, {
      signal: stop.signal,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = '';
    // Bounded: read until both an idle control and a heartbeat arrived (intervals are 150/100 ms).
    for (let i = 0; i < 100 && !(text.includes('event: control') && text.includes(': heartbeat')); i++)
      text += decoder.decode((await reader.read()).value);
    stop.abort();
    expect(text).toContain(`event: control\ndata:{"streamNextOffset":"${snap.offset}","upToDate":true}\n\n`);
    expect(text).toContain(': heartbeat\n\n');
  });
});
