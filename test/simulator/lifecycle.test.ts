// Connection and process lifecycle: rejected, message/stream closing on any live final, a lagging
// reader, cut, restart, stop, closeStream and the reopened task.
import { describe, expect, it } from 'vitest';
import { messageBody, post, rpc } from './raw-client.js';
import { useSimulators, watch } from './support.js';

const start = useSimulators();

describe('single mode: rejected', () => {
  it('writes rejected with id 0 to the submitter only, never buffered, then closes', async () => {
    const c = await start();
    const w = await watch(c.port);
    const running = c.submit('#sim {"hold":true}');
    await w.waitFrames(2);
    const res = post(c.port, messageBody('second', { contextId: 'ctx_2' }));
    await res.ended();
    expect(res.frames).toHaveLength(1);
    expect(res.body).toMatch(
      /^id: 0\nevent: status\ndata: \{"id":"tsk_[0-9a-f]{32}","context_id":"ctx_2","status":\{"state":"rejected","message":"task rejected: capsule is busy"\},"final":true\}\n\n$/,
    );
    expect(c.written.some((f) => f.data.includes('rejected'))).toBe(false);
    await expect(c.submit('third').done).resolves.toEqual({ state: 'rejected' });
    // Not on the watcher, not in a replay.
    const replay = await watch(c.port, { 'last-event-id': '0' });
    post(c.port, rpc('tasks/cancel', { id: running.taskId }));
    await running.done;
    await w.waitFrames(3);
    expect(w.frames.map((f) => f.event)).toEqual(['connection-ack', 'status', 'status']);
    expect(replay.body).not.toContain('rejected');
    w.close();
    replay.close();
  });
});

describe('message/stream closing', () => {
  it('closes on the first live final of ANY task', async () => {
    const c = await start({ taskAcceptance: 'queue' });
    const holder = c.submit('#sim {"hold":true}');
    const w = await watch(c.port);
    const res = post(c.port, messageBody('queued one'));
    // Headers are flushed in the same tick that makes the connection live and queues its task.
    await res.waitFor(() => res.status === 200, 'headers');
    post(c.port, rpc('tasks/cancel', { id: holder.taskId }));
    await res.ended();
    const last = res.frames.at(-1);
    expect(last?.data).toContain(holder.taskId);
    expect(last?.data).toContain('"state":"canceled"');
    await c.idle();
    // The submitter's own task ran afterwards, but its frames never reached the closed stream.
    const own = c.written.filter((f) => f.data.includes('"response":"Echo: queued one"'));
    expect(own).toHaveLength(1);
    expect(res.body).not.toContain('Echo: queued one');
    w.close();
  });
});

describe('a lagging reader', () => {
  it('silently loses the OLDEST queued frames: no gap, the newest arrive', async () => {
    const c = await start({ connectionQueue: 16 });
    const w = await watch(c.port);
    w.socket.pause();
    // ~20 MB: far more than the loopback socket buffers hold, so write() reports backpressure.
    await c.submit('#sim {"thinking":600,"chunkBytes":32768}').done;
    w.socket.resume();
    await w.waitFor(() => w.frames.at(-1)?.data?.includes('"state":"completed"') === true, 'completed');
    const got = w.frames.slice(1).map((f) => f.data);
    const all = c.written.map((f) => f.data);
    expect(got.length).toBeLessThan(all.length);
    expect(w.frames.some((f) => f.event === 'gap')).toBe(false);
    // What arrived is a prefix written before the socket backed up, then the last 16 frames.
    expect(got.slice(-16)).toEqual(all.slice(-16));
    const prefix = got.slice(0, -16);
    expect(prefix).toEqual(all.slice(0, prefix.length));
    // The capsule counts what it dropped (never written): exactly what the reader did not get.
    expect(c.droppedToWatchers).toBe(all.length - got.length);
    w.close();
    // Still counted once the connection is gone (the capsule's 'watchers' event says when).
    await new Promise<void>((resolve) => {
      if (c.watchers === 0) return resolve();
      c.on('watchers', (n: number) => n === 0 && resolve());
    });
    expect(c.droppedToWatchers).toBe(all.length - got.length);
  });
});

describe('process lifecycle', () => {
  it('cutConnections drops sockets; the capsule keeps running', async () => {
    const c = await start();
    const w = await watch(c.port);
    const h = c.submit('#sim {"chunks":3,"delayMs":5}');
    c.cutConnections();
    await w.ended();
    expect(w.body).not.toContain('capsule-closed');
    expect(await h.done).toEqual({ state: 'completed', response: 'chunk 1 chunk 2 chunk 3' });
  });

  it('restart: drops sockets without capsule-closed, new session, empty buffer, counters reset', async () => {
    const c = await start();
    await c.submit('a').done;
    const w = await watch(c.port);
    await w.waitFrames(6);
    await c.restart();
    await w.ended();
    expect(w.body).not.toContain('capsule-closed');
    expect(c.session).toBe(2);
    const fresh = await watch(c.port, { 'last-event-id': '0' });
    expect(fresh.frames.map((f) => f.event)).toEqual(['connection-ack']);
    await c.submit('b').done;
    expect(c.written.filter((f) => f.session === 2).map((f) => f.id)).toEqual(['0', '1', '2', '3', '4', '5']);
    await fresh.waitFrames(7);
    fresh.close();
  });

  it('restart loses a running task', async () => {
    const c = await start();
    const h = c.submit('#sim {"hold":true}');
    await c.restart();
    expect(await h.done).toEqual({ state: 'lost' });
    await c.idle();
  });

  it('stop: drops TCP without capsule-closed and stops listening', async () => {
    const c = await start();
    const w = await watch(c.port);
    const port = c.port;
    await c.stop();
    await w.ended();
    expect(w.body).not.toContain('capsule-closed');
    const refused = post(port, rpc('stream/watch'));
    await refused.ended();
    expect(refused.status).toBe(0);
  });

  it('closeStream: watchers get capsule-closed as the last frame, then end', async () => {
    const c = await start();
    const w = await watch(c.port);
    c.closeStream();
    await w.ended();
    expect(w.body.endsWith('event: capsule-closed\ndata: {}\n\n')).toBe(true);
    expect(w.frames.map((f) => f.event)).toEqual(['connection-ack', 'capsule-closed']);
  });
});

describe('reopened task (max_task_reopens 1)', () => {
  it('repeats the attempt with ids from 0, byte for byte, after the first completed', async () => {
    const c = await start();
    const res = post(c.port, messageBody('#sim {"chunks":2,"thinking":1,"tools":1,"reopen":true}'));
    const w = await watch(c.port);
    const h = await res.waitFrames(1).then(() => JSON.parse(res.frames[0]?.data ?? '{}').id as string);
    await c.idle();
    const frames = c.written.filter((f) => f.data.includes(h));
    expect(frames.length % 2).toBe(0);
    const half = frames.length / 2;
    expect(frames.slice(half)).toEqual(frames.slice(0, half));
    expect(frames[half]?.id).toBe('0');
    expect(frames[half - 1]?.data).toContain('"state":"completed"');
    // message/stream closed on the first attempt's completed; the watcher saw both attempts.
    await res.ended();
    expect(res.frames.filter((f) => f.data?.includes('"state":"completed"'))).toHaveLength(1);
    await w.waitFor(
      () => w.frames.filter((f) => f.data?.includes('"state":"completed"')).length === 2,
      'both',
    );
    w.close();
  });
});
