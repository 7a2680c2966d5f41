/**
 * The native Murmur streaming rules against simulated capsules: gap cases, capsule-closed,
 * message/stream closing rules and the capsule's own answers passed through (the
 * Murmur streaming protocol: "What message/stream writes, in order", "gap", "capsule-closed").
 */
import { describe, expect, it } from 'vitest';
import { ACK_STATELESS, expectedBlocks, useGateways } from './fixtures.js';
import { messageStream, openRaw, rpcPost, WATCH, type ParsedFrame } from './raw-client.js';

const { setup, track, waitForRecord, allRecords } = useGateways();

const isFinal = (f: ParsedFrame): boolean => f.event === 'status' && f.data.includes('"final":true');
const HOLD = '#sim {"hold":true}';

describe('murmur surface: gap', () => {
  it('writes a gap naming the first retained offset for a cursor older than retention', async () => {
    const { gw, sim, capsule } = await setup({}, { config: { retention: { maxRecords: 6, maxAgeMs: 0 } } });
    await sim.submit('first task').done;
    await sim.submit('second task').done;
    const last = sim.written[sim.written.length - 1]!;
    await waitForRecord(gw, capsule, (r) => r.kind === 'frame' && r.data === last.data);
    const { records, position } = await gw.core.read(capsule, 0, 1000);
    expect(position.first).toBeGreaterThan(2);
    const s = track(await rpcPost(gw.baseUrl, capsule, WATCH, { 'Last-Event-ID': '1' }));
    const want = [
      ACK_STATELESS,
      `event: gap\ndata: {"first_available_id":${position.first},"reason":"retention"}`,
      ...expectedBlocks(records),
    ];
    await s.waitFor((x) => x.blocks().length >= want.length, 'gap and replay');
    expect(s.blocks()).toEqual(want);
  });

  it('writes a gap and replays from the first retained for a cursor beyond the head', async () => {
    const { gw, sim, capsule } = await setup();
    await sim.submit('a task').done;
    const last = sim.written[sim.written.length - 1]!;
    await waitForRecord(gw, capsule, (r) => r.kind === 'frame' && r.data === last.data);
    const records = await allRecords(gw, capsule);
    const { head, first } = await gw.core.position(capsule);
    const ahead = String(head + 1_000_000);
    const s = track(await rpcPost(gw.baseUrl, capsule, WATCH, { 'Last-Event-ID': ahead }));
    const want = [
      ACK_STATELESS,
      `event: gap\ndata: {"first_available_id":${first},"reason":"cursor-ahead"}`,
      ...expectedBlocks(records),
    ];
    await s.waitFor((x) => x.blocks().length >= want.length, 'gap and replay');
    expect(s.blocks()).toEqual(want);
  });

  it('turns a possibly-missing fact into a gap naming the next offset, replayed and live', async () => {
    const { gw, capsule } = await setup();
    const fact = await gw.writer.append(capsule, {
      kind: 'fact',
      fact: 'frames-possibly-missing',
      reason: 'no-overlap',
      receivedAt: Date.now(),
    });
    const gapBlock = `event: gap\ndata: {"first_available_id":${fact.offset + 1},"reason":"no-overlap"}`;
    const s = track(await rpcPost(gw.baseUrl, capsule, WATCH));
    await s.waitFor((x) => x.blocks().includes(gapBlock), 'the replayed gap');
    const live = await gw.writer.append(capsule, {
      kind: 'fact',
      fact: 'frames-possibly-missing',
      reason: 'store-unavailable',
      count: 3,
      receivedAt: Date.now(),
    });
    const liveGap = `event: gap\ndata: {"first_available_id":${live.offset + 1},"reason":"store-unavailable"}`;
    await s.waitFor((x) => x.blocks().includes(liveGap), 'the live gap');
    // A watcher resuming after the first fact sees only the second.
    const resumed = track(
      await rpcPost(gw.baseUrl, capsule, WATCH, { 'Last-Event-ID': String(fact.offset) }),
    );
    await resumed.waitFor((x) => x.blocks().includes(liveGap), 'the resumed gap');
    expect(resumed.blocks()).not.toContain(gapBlock);
  });
});

describe('murmur surface: capsule closed, capsule unreachable', () => {
  it('writes capsule-closed as the last frame and ends; a replay of it later does not end a watcher', async () => {
    const { gw, sim, capsule } = await setup();
    const s = track(await rpcPost(gw.baseUrl, capsule, WATCH));
    await s.waitFor((x) => x.blocks().length >= 1, 'ack');
    sim.closeStream();
    await s.ended;
    expect(s.blocks()[s.blocks().length - 1]).toBe('event: capsule-closed\ndata: {}');
    expect(s.body().endsWith('event: capsule-closed\ndata: {}\n\n')).toBe(true);
    const closed = await waitForRecord(gw, capsule, (r) => r.kind === 'fact' && r.fact === 'capsule-closed');
    const again = track(await rpcPost(gw.baseUrl, capsule, WATCH, { 'Last-Event-ID': '0' }));
    const appended = await gw.writer.append(capsule, {
      kind: 'frame',
      event: 'status',
      upstreamId: '5',
      data: '{"after":"close"}',
      receivedAt: Date.now(),
    });
    await again.waitFor((x) => x.body().includes(`id: ${appended.offset}\n`), 'a frame after the close');
    expect(again.isEnded()).toBe(false);
    expect(again.body()).not.toContain('capsule-closed');
    expect(closed.offset).toBeLessThan(appended.offset);
  });

  it('keeps watchers connected with heartbeats while the capsule is gone', async () => {
    const { gw, sim, capsule } = await setup({}, { config: { heartbeatMs: 40 } });
    const s = track(await rpcPost(gw.baseUrl, capsule, WATCH));
    await s.waitFor((x) => x.blocks().length >= 1, 'ack');
    await sim.stop();
    await waitForRecord(gw, capsule, (r) => r.kind === 'fact' && r.fact === 'upstream-lost');
    const before = s.blocks().filter((b) => b === ':heartbeat').length;
    await s.waitFor(
      (x) => x.blocks().filter((b) => b === ':heartbeat').length >= before + 3,
      'heartbeats after the capsule left',
    );
    expect(s.isEnded()).toBe(false);
  });

  it('answers message/stream to an unreachable capsule with an error frame naming that, then closes', async () => {
    const { gw, sim, capsule } = await setup();
    await sim.stop();
    const s = await rpcPost(gw.baseUrl, capsule, messageStream('hello'));
    await s.ended;
    expect(s.status).toBe(200);
    const frames = s.frames();
    expect(frames).toHaveLength(1);
    expect(frames[0]!.event).toBe('error');
    expect(frames[0]!.id).toBeNull();
    // A fixed text: the socket error (it names the capsule's internal address) is only logged.
    expect(JSON.parse(frames[0]!.data)).toEqual({ error: 'capsule unreachable' });
  });

  it('answers a forwarded call to an unreachable capsule with a fixed message, not the socket error', async () => {
    const { gw, sim, capsule } = await setup();
    await sim.stop();
    const res = await fetch(`${gw.baseUrl}/murmur/${capsule}/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tasks/get', params: { id: 'x' } }),
    });
    expect(res.status).toBe(502);
    expect(await res.json()).toEqual({
      jsonrpc: '2.0',
      id: 7,
      error: { code: -32603, message: 'capsule unreachable' },
    });
  });
});

describe('murmur surface: message/stream', () => {
  it('streams live frames until the first live final status; a replayed final does not close', async () => {
    const { gw, sim, capsule } = await setup({ taskAcceptance: 'queue' });
    await sim.submit('earlier task').done;
    const earlierFinal = sim.written[sim.written.length - 1]!;
    await waitForRecord(gw, capsule, (r) => r.kind === 'frame' && r.data === earlierFinal.data);
    const s = track(await rpcPost(gw.baseUrl, capsule, messageStream('mine'), { 'Last-Event-ID': '0' }));
    expect(s.headers['content-type']).toBe('text/event-stream');
    await s.ended;
    const frames = s.frames();
    const finals = frames.filter(isFinal);
    expect(finals.map((f) => f.data)).toEqual([earlierFinal.data, sim.written[sim.written.length - 1]!.data]);
    expect(frames[frames.length - 1]).toBe(finals[1]);
    expect(finals[1]!.data).toContain('Echo: mine');
    // Every frame on it is the log's, with its offset as id, in log order.
    const records = await allRecords(gw, capsule);
    const blocks = expectedBlocks(records.filter((r) => r.offset <= Number(finals[1]!.id)));
    expect(s.blocks().filter((b) => b !== ':heartbeat')).toEqual(blocks);
  });

  it('without Last-Event-ID replays nothing and closes on the final of any task, even another one', async () => {
    const { gw, sim, capsule } = await setup({ taskAcceptance: 'queue' });
    // The other task holds until canceled, so its final is, deterministically, the first live one.
    const other = sim.submit(HOLD);
    await waitForRecord(gw, capsule, (r) => r.kind === 'frame' && r.data.includes(other.taskId));
    const pending = rpcPost(gw.baseUrl, capsule, messageStream('queued after it'));
    // Our head is taken and the submission recorded (then queued by the capsule): end the other task.
    await waitForRecord(gw, capsule, (r) => r.kind === 'submission' && r.text === 'queued after it');
    await gw.core.cancel(capsule, other.taskId);
    const s = track(await pending);
    await s.ended;
    const frames = s.frames();
    const last = frames[frames.length - 1]!;
    expect(isFinal(last), s.body()).toBe(true);
    expect(last.data).toContain(other.taskId);
    expect(last.data).toContain('"state":"canceled"');
    expect(frames.filter(isFinal)).toHaveLength(1);
    const submissions = (await allRecords(gw, capsule)).filter((r) => r.kind === 'submission');
    expect(submissions).toHaveLength(1);
    expect(submissions[0]).toMatchObject({ protocol: 'murmur', text: 'queued after it', owner: null });
    expect((submissions[0] as { contextId: string }).contextId).toMatch(/^ctx_[0-9a-f]{32}$/);
  });

  it('passes the capsule rejected status through as written, then closes', async () => {
    const { gw, sim, capsule } = await setup({ taskAcceptance: 'single' });
    const held = sim.submit(HOLD);
    await waitForRecord(gw, capsule, (r) => r.kind === 'frame' && r.data.includes(held.taskId));
    const s = await rpcPost(gw.baseUrl, capsule, messageStream('one more'));
    await s.ended;
    const blocks = s.blocks().filter((b) => b !== ':heartbeat');
    expect(blocks).toHaveLength(1);
    expect(blocks[0]).toMatch(
      /^id: 0\nevent: status\ndata: \{"id":"tsk_[0-9a-f]{32}","context_id":"ctx_[0-9a-f]{32}","status":\{"state":"rejected","message":"task rejected: capsule is busy"\},"final":true\}$/,
    );
  });

  it('passes an invalid-JSON error frame through byte for byte, then closes', async () => {
    const { gw, capsule } = await setup();
    const body = {
      jsonrpc: '2.0',
      id: 7,
      method: 'message/stream',
      params: { message: { messageId: 'm1', role: 'user', parts: 'x' } },
    };
    const s = await rpcPost(gw.baseUrl, capsule, body);
    await s.ended;
    expect(s.body()).toBe(
      'event: error\ndata: {"error":"Invalid params: invalid type: string "x", expected a sequence"}\n\n',
    );
  });

  it('answers -32601 as JSON when the capsule accepts no tasks', async () => {
    const { gw, capsule } = await setup({ taskAcceptance: 'none' });
    const s = await rpcPost(gw.baseUrl, capsule, messageStream('hi'));
    await s.ended;
    expect(s.status).toBe(200);
    expect(s.headers['content-type']).toBe('application/json');
    expect(s.body()).toBe('{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}');
  });

  it('writes heartbeats on message/stream too', async () => {
    const { gw, capsule } = await setup({}, { config: { heartbeatMs: 40 } });
    const s = track(await rpcPost(gw.baseUrl, capsule, messageStream(HOLD)));
    await s.waitFor((x) => x.blocks().filter((b) => b === ':heartbeat').length >= 2, 'heartbeats');
    expect(s.isEnded()).toBe(false);
  });

  it('forwards other methods to the capsule and answers its JSON', async () => {
    const { gw, sim, capsule } = await setup();
    const task = sim.submit('look me up');
    await task.done;
    const get = await rpcPost(gw.baseUrl, capsule, {
      jsonrpc: '2.0',
      id: 'q',
      method: 'tasks/get',
      params: { id: task.taskId },
    });
    await get.ended;
    expect(get.status).toBe(200);
    expect(JSON.parse(get.body())).toMatchObject({ jsonrpc: '2.0', id: 'q', result: { id: task.taskId } });
    const unknown = await rpcPost(gw.baseUrl, capsule, { jsonrpc: '2.0', id: 3, method: 'nope/nope' });
    await unknown.ended;
    expect(unknown.body()).toBe(
      '{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found"}}',
    );
  });
});

describe('murmur surface: EventSource door', () => {
  it('serves stream/watch on GET …/events, from ?last_event_id or the Last-Event-ID header', async () => {
    const { gw, sim, capsule } = await setup();
    await sim.submit('for eventsource').done;
    const last = sim.written[sim.written.length - 1]!;
    await waitForRecord(gw, capsule, (r) => r.kind === 'frame' && r.data === last.data);
    const records = await allRecords(gw, capsule);
    const from = records[records.length - 3]!.offset;
    const want = [ACK_STATELESS, ...expectedBlocks(records.filter((r) => r.offset > from))];
    const byQuery = track(await openRaw(`${gw.baseUrl}/murmur/${capsule}/events?last_event_id=${from}`));
    expect(byQuery.headers['content-type']).toBe('text/event-stream');
    await byQuery.waitFor((x) => x.blocks().length >= want.length, 'replay by query');
    expect(byQuery.blocks()).toEqual(want);
    const byHeader = track(
      await openRaw(`${gw.baseUrl}/murmur/${capsule}/events?last_event_id=0`, {
        headers: { 'Last-Event-ID': String(from) },
      }),
    );
    await byHeader.waitFor((x) => x.blocks().length >= want.length, 'replay by header');
    expect(byHeader.blocks()).toEqual(want);
  });
});
