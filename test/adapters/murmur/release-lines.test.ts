/**
 * The native surface in front of later release lines: a 1.0 capsule is served in its own dialect
 * (SendStreamingMessage from the log, the door's -32009 without one A2A-Version), 0.6 tool-call
 * frames pass through, and on 0.5+ a `message/stream` closes on its own task's final, not another's.
 */
import { describe, expect, it } from 'vitest';
import { useGateways } from './fixtures.js';
import { messageStream, rpcPost, WATCH } from './raw-client.js';

const { setup, track, waitForRecord } = useGateways();

describe('native surface: release lines', () => {
  it('1.0: SendStreamingMessage is submitted with the 1.0 names and served from the log; no A2A-Version is -32009', async () => {
    const { gw, capsule } = await setup({ release: '1.0' });
    await waitForRecord(
      gw,
      capsule,
      (r) => r.kind === 'fact' && r.fact === 'upstream-connected' && r.release === '1.0',
    );
    const body = {
      jsonrpc: '2.0',
      id: 7,
      method: 'SendStreamingMessage',
      params: {
        message: { messageId: 'm-1', role: 'ROLE_USER', parts: [{ text: 'hello' }], contextId: 'ctx_1' },
      },
    };
    const refused = track(await rpcPost(gw.baseUrl, capsule, body));
    await refused.ended;
    expect(JSON.parse(refused.body())).toEqual({
      jsonrpc: '2.0',
      id: 7,
      error: { code: -32009, message: 'A2A-Version 1.0 required' },
    });
    const s = track(await rpcPost(gw.baseUrl, capsule, body, { 'A2A-Version': '1.0' }));
    await s.ended;
    const finals = s.frames().filter((f) => f.event === 'status' && f.data.includes('"final":true'));
    expect(finals).toHaveLength(1);
    expect(finals[0]!.data).toContain('"completed"');
    // The watch is served with gateway offsets as ids, like every line.
    const w = track(await rpcPost(gw.baseUrl, capsule, WATCH, { 'A2A-Version': '1.0.2' }));
    await w.waitFor(
      (x) => x.frames().some((f) => f.event === 'status' && f.data.includes('"completed"')),
      'the task',
    );
    const ids = w.frames().flatMap((f) => (f.id ? [Number(f.id)] : []));
    expect(ids.length).toBeGreaterThan(0);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
  });

  it('0.6: tool-call frames pass through on stream/watch', async () => {
    const { sim, gw, capsule } = await setup({ release: '0.6' });
    await sim.submit('#sim {"tools":2,"turns":2}').done;
    const w = track(await rpcPost(gw.baseUrl, capsule, WATCH));
    await w.waitFor((x) => x.frames().some((f) => f.event === 'artifact'), 'the artifacts');
    const events = w.frames().map((f) => f.event);
    expect(events).toContain('tool-call-started');
    expect(events.indexOf('tool-call-started')).toBeLessThan(events.indexOf('artifact'));
  });

  it("0.5: message/stream stays open past another task's final and closes on its own", async () => {
    const { sim, gw, capsule } = await setup({ release: '0.5', taskAcceptance: 'queue' });
    await waitForRecord(
      gw,
      capsule,
      (r) => r.kind === 'fact' && r.fact === 'upstream-connected' && r.release === '0.5',
    );
    const first = sim.submit('#sim {"chunks":30,"delayMs":5}');
    const s = track(await rpcPost(gw.baseUrl, capsule, messageStream('mine')));
    await first.done;
    await s.ended;
    const finals = s.frames().filter((f) => f.event === 'status' && f.data.includes('"final":true'));
    // Its own final closes it, whatever came before (the queued-behind task's final is the last frame).
    expect(finals.at(-1)!.data).not.toContain(first.taskId);
    expect(s.frames().some((f) => f.data.includes(first.taskId) && f.data.includes('"final":true'))).toBe(
      true,
    );
  });
});
