import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { LogWriter } from '../../src/log/log-writer.js';
import { MemoryStore } from '../../src/log/memory-store.js';
import { CapsuleClient } from '../../src/upstream/capsule-client.js';
import { CapsuleUpstream } from '../../src/upstream/capsule-upstream.js';
import { uniqueCapsule } from '../support/redis.js';

let sim: SimulatedCapsule | undefined;
let client: CapsuleClient | undefined;
let server: Server | undefined;
const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0)) await stop();
  client?.close();
  await sim?.stop();
  if (server) await new Promise<void>((r) => server!.close(() => r()));
  sim = undefined;
  client = undefined;
  server = undefined;
});

/** A capsule that answers every POST with a fixed body (for answers the simulator does not give). */
const fixedServer = async (status: number, type: string, body: string): Promise<string> => {
  server = createServer((req, res) => {
    req.resume();
    res.writeHead(status, { 'content-type': type });
    res.end(body);
  });
  await new Promise<void>((r) => server!.listen(0, '127.0.0.1', () => r()));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
};

describe('CapsuleClient.submit', () => {
  it('accepted: the task id of OUR task, found by context id on the submit stream', async () => {
    sim = await startSimulator({ taskAcceptance: 'queue' });
    client = new CapsuleClient({ url: sim.url });
    const outcome = await client.submit({ text: 'hi', contextId: 'ctx-mine', messageId: 'm1' });
    expect(outcome.kind).toBe('accepted');
    if (outcome.kind !== 'accepted') return;
    expect(sim.written.some((w) => w.data.includes(outcome.taskId) && w.data.includes('"ctx-mine"'))).toBe(
      true,
    );
  });

  it('queued behind another task, without a watch: the submit stream closes first (unreachable)', async () => {
    sim = await startSimulator({ taskAcceptance: 'queue' });
    client = new CapsuleClient({ url: sim.url });
    sim.submit('#sim {"chunks":3,"delayMs":5}');
    expect(await client.submit({ text: 'hi', contextId: 'ctx-q', messageId: 'm1' })).toEqual({
      kind: 'unreachable',
      reason: 'stream closed before the task started',
    });
  });

  it('queued behind another task, with the watch (CapsuleUpstream): accepted with OUR task id', async () => {
    sim = await startSimulator({ taskAcceptance: 'queue' });
    const store = new MemoryStore();
    const upstream = new CapsuleUpstream({
      capsule: uniqueCapsule('cu'),
      url: sim.url,
      writer: new LogWriter(store),
      store,
    });
    upstream.start();
    stops.push(() => upstream.stop());
    // The other task runs; its final status closes our submit stream before our task starts.
    const other = sim.submit('#sim {"chunks":3,"delayMs":5}');
    const outcome = await upstream.submit({ text: 'hi', contextId: 'ctx-mine', messageId: 'm1' });
    expect(outcome.kind).toBe('accepted');
    if (outcome.kind !== 'accepted') return;
    expect(outcome.contextId).toBe('ctx-mine');
    expect(outcome.taskId).not.toBe(other.taskId);
    expect(sim.written.some((w) => w.data.includes(outcome.taskId) && w.data.includes('"ctx-mine"'))).toBe(
      true,
    );
  });

  it('a running task of the SAME context is never taken for ours: busy single capsule → rejected', async () => {
    sim = await startSimulator({ taskAcceptance: 'single' });
    const store = new MemoryStore();
    const capsule = uniqueCapsule('cu');
    const upstream = new CapsuleUpstream({
      capsule,
      url: sim.url,
      writer: new LogWriter(store),
      store,
    });
    upstream.start();
    stops.push(() => upstream.stop());
    // An earlier turn of the same conversation keeps writing `working` statuses with our context id.
    const earlier = sim.submit('#sim {"turns":100000,"delayMs":1}', 'ctx-conv');
    // Through the watch: a frame of its second turn is in the log (the watch delivers live frames).
    for (let after = 0, found = false; !found;) {
      const r = await store.waitAfter(capsule, after, 1000, 5000);
      if (r.records.length === 0) throw new Error('the earlier task wrote nothing');
      found = r.records.some((x) => x.kind === 'frame' && x.data.includes('inference turn 2'));
      after = r.records[r.records.length - 1]!.offset;
    }
    const outcome = await upstream.submit({ text: 'next turn', contextId: 'ctx-conv', messageId: 'm2' });
    expect(outcome.kind).toBe('rejected');
    // Still running: it was never finished, so the rejection was the capsule's real answer.
    expect((await upstream.cancel(earlier.taskId)).kind).toBe('canceled');
    await earlier.done;
  });

  it('accepted when the watch saw our task start before the submit answered (no crash, no timeout)', async () => {
    sim = await startSimulator();
    // A watch that already delivered our task's first frame when the submit subscribes to it: the
    // outcome must settle from it at once (this once crashed on a timer used before it existed).
    const early = JSON.stringify({
      id: 'tsk_early',
      context_id: 'ctx-early',
      status: { state: 'working', message: 'inference turn 1' },
      final: false,
    });
    client = new CapsuleClient({
      url: sim.url,
      watchFrames: (listener) => {
        listener({ event: 'status', upstreamId: '0', data: early });
        return () => {};
      },
    });
    const outcome = await client.submit({ text: 'hi', contextId: 'ctx-early', messageId: 'm1' });
    expect(outcome).toEqual({ kind: 'accepted', taskId: 'tsk_early', contextId: 'ctx-early' });
  });

  it('rejected: the capsule is busy (single), the rejected frame byte for byte', async () => {
    sim = await startSimulator({ taskAcceptance: 'single' });
    client = new CapsuleClient({ url: sim.url });
    sim.submit('#sim {"hold":true}');
    const outcome = await client.submit({ text: 'hi', contextId: 'c', messageId: 'm' });
    expect(outcome.kind).toBe('rejected');
    if (outcome.kind !== 'rejected') return;
    expect(outcome.frame.id).toBe('0');
    expect(JSON.parse(outcome.frame.data)).toMatchObject({
      status: { state: 'rejected', message: 'task rejected: capsule is busy' },
      final: true,
    });
  });

  it('invalid: the error frame data, raw', async () => {
    sim = await startSimulator();
    client = new CapsuleClient({ url: sim.url });
    const rawBody = '{"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"role":"user","parts":[]}}';
    const outcome = await client.submit({ text: '', contextId: 'c', messageId: 'm', rawBody });
    expect(outcome.kind).toBe('invalid');
    if (outcome.kind === 'invalid') expect(outcome.data).toContain('Invalid params');
  });

  it('method-not-found: task_acceptance none answers JSON-RPC -32601, body byte for byte', async () => {
    sim = await startSimulator({ taskAcceptance: 'none' });
    client = new CapsuleClient({ url: sim.url });
    const outcome = await client.submit({ text: 'hi', contextId: 'c', messageId: 'm', rpcId: 7 });
    expect(outcome).toEqual({
      kind: 'method-not-found',
      body: '{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found"}}',
    });
  });

  it('unreachable: connection refused, missing door token, timeout', async () => {
    client = new CapsuleClient({ url: 'http://127.0.0.1:1/' });
    expect(await client.submit({ text: 'x', contextId: 'c', messageId: 'm' })).toEqual({
      kind: 'unreachable',
      reason: 'ECONNREFUSED',
    });
    client.close();
    sim = await startSimulator({ doorToken: 'sekret' });
    client = new CapsuleClient({ url: sim.url });
    expect(await client.submit({ text: 'x', contextId: 'c', messageId: 'm' })).toEqual({
      kind: 'unreachable',
      reason: 'HTTP 401',
    });
    client.close();
    client = new CapsuleClient({ url: sim.url, doorToken: 'sekret' });
    expect((await client.submit({ text: 'x', contextId: 'c', messageId: 'm' })).kind).toBe('accepted');
    client.close();
    sim.submit('#sim {"hold":true}'); // single: our task never starts, no frame of ours arrives
    await sim.stop();
    sim = await startSimulator({ taskAcceptance: 'queue' });
    sim.submit('#sim {"hold":true}');
    client = new CapsuleClient({ url: sim.url, submitTimeoutMs: 200 });
    expect(await client.submit({ text: 'x', contextId: 'c', messageId: 'm' })).toEqual({
      kind: 'unreachable',
      reason: 'timeout waiting for the task to start',
    });
  });
});

describe('CapsuleClient.cancel and forward', () => {
  it('cancel: canceled, then not-cancelable for the ended task', async () => {
    sim = await startSimulator();
    client = new CapsuleClient({ url: sim.url });
    const h = sim.submit('#sim {"hold":true}');
    const first = await client.cancel(h.taskId);
    expect(first.kind).toBe('canceled');
    await h.done;
    const second = await client.cancel(h.taskId);
    expect(second.kind).toBe('not-cancelable');
    if (second.kind === 'not-cancelable') expect(JSON.parse(second.body).error.code).toBe(-32002);
  });

  it.each(['0.4', '0.5', '0.6', '1.0'] as const)(
    'cancel on %s: canceled, and a completed task answered as not-cancelable (-32002) whatever the line says',
    async (release) => {
      // 0.6 returns an ended task unchanged, 1.0 says -32002 again (TaskNotCancelable), with its own names.
      const token = release === '0.4' ? null : 'mdt_cancel_token';
      sim = await startSimulator({ release, doorToken: token });
      client = new CapsuleClient({ url: sim.url, doorToken: token });
      const h = sim.submit('#sim {"hold":true}');
      expect((await client.cancel(h.taskId)).kind).toBe('canceled');
      await h.done;
      const completed = sim.submit('#sim {"chunks":2}');
      expect((await completed.done).state).toBe('completed');
      const late = await client.cancel(completed.taskId);
      expect(late.kind).toBe('not-cancelable');
      if (late.kind === 'not-cancelable') expect(JSON.parse(late.body).error.code).toBe(-32002);
    },
  );

  it('cancel: method-not-found and unreachable', async () => {
    const url = await fixedServer(
      200,
      'application/json',
      '{"jsonrpc":"2.0","id":1,"error":{"code":-32601}}',
    );
    client = new CapsuleClient({ url });
    expect((await client.cancel('tsk_x')).kind).toBe('method-not-found');
    client.close();
    client = new CapsuleClient({ url: 'http://127.0.0.1:1/' });
    expect(await client.cancel('tsk_x')).toEqual({
      kind: 'unreachable',
      reason: 'capsule unreachable: ECONNREFUSED',
    });
  });

  it('forward: status, content type and body raw; unreachable throws upstream_unreachable', async () => {
    sim = await startSimulator();
    client = new CapsuleClient({ url: sim.url });
    const r = await client.forward(
      '{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"id":"tsk_nope"}}',
    );
    expect(r.status).toBe(200);
    expect(r.contentType).toBe('application/json');
    expect(JSON.parse(r.body)).toMatchObject({ id: 3, error: { code: -32001 } });
    client.close();
    client = new CapsuleClient({ url: 'http://127.0.0.1:1/' });
    const err = await client.forward('{}').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).code).toBe('upstream_unreachable');
  });
});
