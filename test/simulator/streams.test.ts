// Frames on the wire: connection-ack, byte-exact frame order, heartbeats, the four id counters and
// the replay table over HTTP.
import { describe, expect, it } from 'vitest';
import { messageBody, post } from './raw-client.js';
import { useSimulators, watch } from './support.js';

const start = useSimulators();
const CHUNK0 = 4611686018427387903n;
const INPUT0 = 9223372036854775807n;
const QCANCEL0 = 2305843009213693951n;

describe('stream/watch', () => {
  it.each(['stateless', 'threaded'] as const)('starts with connection-ack (%s)', async (mode) => {
    const c = await start({ conversationMode: mode });
    const w = await watch(c.port);
    expect(w.body).toBe(`event: connection-ack\ndata: {"role":"observer","conversation_mode":"${mode}"}\n\n`);
    w.close();
  });
});

describe('frame bytes', () => {
  it('message/stream writes the default script byte for byte and closes on completed', async () => {
    const c = await start();
    const res = post(c.port, messageBody('hello world', { contextId: 'ctx_mine' }));
    await res.ended();
    const task = JSON.parse(res.frames[0]?.data ?? '{}').id as string;
    expect(task).toMatch(/^tsk_[0-9a-f]{32}$/);
    const s = (id: number, status: string, final: boolean) =>
      `id: ${id}\nevent: status\ndata: {"id":"${task}","context_id":"ctx_mine","status":${status},"final":${final}}\n\n`;
    const t = (id: number, event: string, text: string, final: boolean) =>
      `id: ${id}\nevent: ${event}\ndata: {"id":"${task}","text":${JSON.stringify(text)},"final":${final}}\n\n`;
    expect(res.body).toBe(
      s(0, '{"state":"working","message":"inference turn 1"}', false) +
        t(1, 'thinking', 'Reading the message', false) +
        t(2, 'text', 'Echo:', false) +
        t(3, 'text', ' hello', false) +
        t(4, 'text', ' world', false) +
        t(5, 'text', '', true) +
        s(6, '{"state":"completed","message":"session ended","response":"Echo: hello world"}', true),
    );
    expect(c.written.map((w) => w.id)).toEqual(['0', '1', '2', '3', '4', '5', '6']);
    expect(c.written[0]).toEqual({ session: 1, event: 'status', id: '0', data: res.frames[0]?.data });
  });

  it('mints a ctx_ context id when the message has none', async () => {
    const c = await start();
    const h = c.submit('hi');
    expect(h.contextId).toMatch(/^ctx_[0-9a-f]{32}$/);
    await h.done;
    expect(JSON.parse(c.written[0]?.data ?? '{}').context_id).toBe(h.contextId);
  });
});

describe('heartbeat', () => {
  it('writes :heartbeat on its interval, not reset by frames', async () => {
    const c = await start({ heartbeatMs: 50 });
    const w = await watch(c.port);
    await w.waitFor(() => w.heartbeats >= 2, 'two idle heartbeats');
    expect(w.blocks.find((b) => b.comment !== undefined)?.raw).toBe(':heartbeat');
    expect(w.body).toContain('\n\n:heartbeat\n\n');
    // A task writing a frame every 10 ms for ~400 ms: heartbeats keep coming between its frames.
    await c.submit('#sim {"chunks":40,"delayMs":10}').done;
    await w.waitFor(() => w.frames.at(-1)?.event === 'status' && w.frames.length >= 43, 'task frames');
    const firstTask = w.blocks.findIndex((b) => b.event === 'status');
    const lastTask = w.blocks.length - 1 - [...w.blocks].reverse().findIndex((b) => b.event === 'status');
    const between = w.blocks.slice(firstTask, lastTask).filter((b) => b.comment === 'heartbeat').length;
    expect(between).toBeGreaterThanOrEqual(2);
    w.close();
  });
});

describe('id counters (spec "Event ids")', () => {
  it('task counter: from 0 for every task; chunk counter shares its run', async () => {
    const c = await start();
    await c.submit('#sim {"tools":2,"chunks":2,"thinking":1}').done;
    await c.submit('hi').done;
    const seq = c.written.map((w) => `${w.event}:${w.id}`);
    expect(seq).toEqual([
      'status:0', // working turn 1 (task counter)
      'thinking:1', // chunk counter := task counter (1)
      'text:2', // "" final: end of turn 1
      'artifact:3', // task counter := chunk counter (3)
      'artifact:4',
      'status:5', // working turn 2
      'text:6',
      'text:7',
      'text:8',
      'status:9', // completed
      'status:0', // the next task starts again at 0
      'thinking:1',
      'text:2',
      'text:3',
      'text:4',
      'status:5',
    ]);
  });

  it('whole reply: numbered from the chunk counter, repeating the task counter value', async () => {
    const c = await start();
    await c.submit('#sim {"reply":"All at once."}').done;
    expect(c.written.map((w) => `${w.event}:${w.id}`)).toEqual(['status:0', 'text:1', 'status:1']);
    expect(c.written[1]?.data).toMatch(/"text":"All at once.","final":true}$/);
  });

  it('chunk counter: 2^62-1 at launch, reset by restart', async () => {
    const c = await start();
    await c.submit('#sim {"startChunks":2}').done;
    expect(c.written.slice(0, 2).map((w) => w.id)).toEqual([CHUNK0.toString(), (CHUNK0 + 1n).toString()]);
    await c.submit('#sim {"startChunks":1}').done;
    // The first task's last inference call left the counter at 2 (its "" text took 1): not 2^62+1.
    expect(c.written.find((w, i) => i > 3 && w.event === 'text')?.id).toBe('2');
    await c.restart();
    await c.submit('#sim {"startChunks":1}').done;
    expect(c.written.filter((w) => w.session === 2)[0]?.id).toBe(CHUNK0.toString());
  });

  it('input-wait counter: 2^63-1 again for every request-input; context_id absent', async () => {
    const c = await start();
    const h = c.submit('#sim {"input":{"prompt":"Which?","outcome":"answer","afterMs":5}}');
    await h.done;
    const t = c.submit('#sim {"input":{"prompt":"Sure?","outcome":"timeout","afterMs":5}}');
    await t.done;
    const waits = c.written.filter((w) => w.id !== null && BigInt(w.id) >= INPUT0);
    expect(waits.map((w) => [w.id, w.data.replace(/tsk_[0-9a-f]+/, 'T')])).toEqual([
      [INPUT0.toString(), '{"id":"T","status":{"state":"input-required","message":"Which?"},"final":false}'],
      [(INPUT0 + 1n).toString(), '{"id":"T","status":{"state":"working","message":"resumed"},"final":false}'],
      [INPUT0.toString(), '{"id":"T","status":{"state":"input-required","message":"Sure?"},"final":false}'],
      [
        (INPUT0 + 1n).toString(),
        '{"id":"T","status":{"state":"failed","message":"input-timeout"},"final":true}',
      ],
    ]);
    // After input-timeout the task goes on to its own final status.
    expect(await t.done).toEqual({ state: 'completed', response: '' });
    const last = c.written.filter((w) => w.data.includes(t.taskId)).slice(-3);
    expect(last.map((w) => w.event)).toEqual(['status', 'text', 'status']);
    const afterTimeout = c.written.filter((w) => w.data.includes(t.taskId) && w.event === 'artifact');
    expect(JSON.parse(afterTimeout[0]?.data ?? '{}').artifact.is_error).toBe(true);
  });

  it('queued-cancel counter: 2^61-1 once per session, advancing per frame, reset by restart', async () => {
    const c = await start({ taskAcceptance: 'queue' });
    c.submit('#sim {"hold":true}');
    const a = c.submit('one');
    const b = c.submit('two');
    const cancel = async (taskId: string) => {
      const res = post(
        c.port,
        JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tasks/cancel', params: { id: taskId } }),
      );
      await res.waitFor(() => res.body.endsWith('}'), 'cancel answer');
      res.close();
    };
    await cancel(b.taskId);
    await cancel(a.taskId);
    const cancels = c.written.filter((w) => w.data.includes('before it started'));
    expect(cancels.map((w) => w.id)).toEqual([QCANCEL0.toString(), (QCANCEL0 + 1n).toString()]);
    expect(cancels[0]?.data).toBe(
      `{"id":"${b.taskId}","context_id":"${b.contextId}","status":{"state":"canceled","message":"task canceled before it started"},"final":true}`,
    );
    await c.restart();
    c.submit('#sim {"hold":true}');
    const d = c.submit('three');
    await cancel(d.taskId);
    expect(c.written.at(-1)?.id).toBe(QCANCEL0.toString());
  });
});

describe('replay over HTTP (spec "Replay")', () => {
  it('stream/watch with no header replays from 0, skipping every id-0 frame', async () => {
    const c = await start();
    await c.submit('a').done;
    await c.submit('b').done;
    const w = await watch(c.port);
    await w.waitFrames(11);
    expect(w.frames.map((f) => f.id ?? f.event)).toEqual([
      'connection-ack',
      '1',
      '2',
      '3',
      '4',
      '5',
      '1',
      '2',
      '3',
      '4',
      '5',
    ]);
    w.close();
  });

  it('empty buffer: only the ack', async () => {
    const c = await start({ heartbeatMs: 30 });
    const w = await watch(c.port, { 'Last-Event-ID': '0' });
    await w.waitFor(() => w.heartbeats >= 1, 'a heartbeat');
    expect(w.frames.map((f) => f.event)).toEqual(['connection-ack']);
    w.close();
  });

  it('Last-Event-ID (any case) N: frames with id > N, in buffer order', async () => {
    const c = await start();
    await c.submit('a').done;
    await c.submit('b').done;
    const w = await watch(c.port, { 'LAST-EVENT-ID': '3' });
    await w.waitFrames(5);
    expect(w.frames.map((f) => f.id ?? f.event)).toEqual(['connection-ack', '4', '5', '4', '5']);
    w.close();
  });

  it('oldest id > N+1: gap then the whole buffer; == N+1: no gap', async () => {
    const c = await start({ bufferSize: 4 });
    await c.submit('x y').done; // ids 0..6, the buffer keeps 3,4,5,6
    const gap = await watch(c.port, { 'last-event-id': '1' });
    await gap.waitFrames(6);
    expect(gap.frames.map((f) => f.id ?? f.event)).toEqual(['connection-ack', 'gap', '3', '4', '5', '6']);
    expect(gap.frames[1]?.raw).toBe('event: gap\ndata: {"first_available_id":3}');
    const noGap = await watch(c.port, { 'last-event-id': '2' });
    await noGap.waitFrames(5);
    expect(noGap.frames.map((f) => f.id ?? f.event)).toEqual(['connection-ack', '3', '4', '5', '6']);
    gap.close();
    noGap.close();
  });

  it('stream/watch with a non-numeric Last-Event-ID replays from 0', async () => {
    const c = await start();
    await c.submit('a').done;
    const w = await watch(c.port, { 'last-event-id': 'abc' });
    await w.waitFrames(6);
    expect(w.frames.map((f) => f.id ?? f.event)).toEqual(['connection-ack', '1', '2', '3', '4', '5']);
    w.close();
  });

  it('message/stream replays only on a numeric header, before its own task; a replayed final does not close', async () => {
    const c = await start();
    const first = c.submit('a');
    await first.done;
    const none = post(c.port, messageBody('b'), { 'last-event-id': 'zz' });
    await none.ended();
    expect(none.frames.every((f) => !f.data?.includes(first.taskId))).toBe(true);
    const replayed = post(c.port, messageBody('c'), { 'Last-Event-ID': '3' });
    await replayed.ended();
    const finals = replayed.frames.filter((f) => f.data?.includes('"final":true}') && f.event === 'status');
    expect(finals).toHaveLength(3); // task a's and b's completed (replayed), then c's own (live)
    expect(replayed.frames.slice(0, 4).map((f) => f.id)).toEqual(['4', '5', '4', '5']);
    expect(replayed.frames.at(-1)?.data).toContain('"response":"Echo: c"');
  });
});
