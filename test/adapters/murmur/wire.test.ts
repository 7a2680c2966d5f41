/**
 * Byte-exact wire tests of the native Murmur surface against simulated capsules (the
 * Murmur streaming protocol: "Endpoints", "Frame format", "gap", "Heartbeat", "Replay").
 */
import { describe, expect, it } from 'vitest';
import { ACK_STATELESS, expectedBlocks, useGateways } from './fixtures.js';
import { messageStream, openRaw, rpcPost, WATCH } from './raw-client.js';

const { setup, track, waitForRecord, allRecords } = useGateways();

describe('murmur surface: headers and the 404 rule', () => {
  it('answers stream/watch with the spec headers, connection-ack first', async () => {
    const { gw, capsule } = await setup();
    const s = track(await rpcPost(gw.baseUrl, capsule, WATCH));
    expect(s.status).toBe(200);
    expect(s.headers['content-type']).toBe('text/event-stream');
    expect(s.headers['cache-control']).toBe('no-cache');
    expect(s.headers.connection).toBe('keep-alive');
    expect(s.headers['x-accel-buffering']).toBe('no');
    expect(s.headers['content-length']).toBeUndefined();
    await s.waitFor((x) => x.blocks().length >= 1, 'connection-ack');
    expect(s.blocks()[0]).toBe(ACK_STATELESS);
    expect(s.body()).not.toContain('\r');
  });

  it('serves the address without the trailing slash too', async () => {
    const { gw, capsule } = await setup();
    const s = track(
      await openRaw(`${gw.baseUrl}/murmur/${capsule}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json; charset=utf-8' },
        body: JSON.stringify(WATCH),
      }),
    );
    expect(s.status).toBe(200);
    await s.waitFor((x) => x.blocks().length >= 1, 'connection-ack');
    expect(s.blocks()[0]).toBe(ACK_STATELESS);
  });

  it('carries the capsule conversation_mode in connection-ack', async () => {
    const { gw, capsule } = await setup({ conversationMode: 'threaded' });
    const s = track(await rpcPost(gw.baseUrl, capsule, WATCH));
    await s.waitFor((x) => x.blocks().length >= 1, 'connection-ack');
    expect(s.blocks()[0]).toBe(
      'event: connection-ack\ndata: {"role":"observer","conversation_mode":"threaded"}',
    );
  });

  it('answers 404 with an empty body like the capsule: no JSON type, empty body, unknown capsule, GET', async () => {
    const { gw, capsule } = await setup();
    const cases: [string, { method: string; headers?: Record<string, string>; body?: string }][] = [
      [
        `/murmur/${capsule}/`,
        { method: 'POST', headers: { 'content-type': 'text/plain' }, body: JSON.stringify(WATCH) },
      ],
      [`/murmur/${capsule}/`, { method: 'POST', body: JSON.stringify(WATCH) }],
      [`/murmur/${capsule}/`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '' }],
      [`/murmur/${capsule}/`, { method: 'GET' }],
      [
        '/murmur/no-such-capsule/',
        { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(WATCH) },
      ],
      ['/murmur/no-such-capsule/events', { method: 'GET' }],
    ];
    for (const [path, init] of cases) {
      const s = await openRaw(`${gw.baseUrl}${path}`, init);
      await s.ended;
      expect([path, init.method, s.status, s.body()]).toEqual([path, init.method, 404, '']);
    }
  });

  it('answers a body that is not JSON with the JSON-RPC parse error', async () => {
    const { gw, capsule } = await setup();
    const s = await rpcPost(gw.baseUrl, capsule, '{"jsonrpc":');
    await s.ended;
    expect(s.status).toBe(200);
    expect(s.headers['content-type']).toBe('application/json');
    expect(s.body()).toBe('{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}');
  });

  it('answers an oversized body with 413 and a JSON-RPC error', async () => {
    const { gw, capsule } = await setup({}, { config: { bodyLimitBytes: 64 } });
    const s = await rpcPost(gw.baseUrl, capsule, messageStream('x'.repeat(200)));
    await s.ended;
    expect(s.status).toBe(413);
    expect(s.body()).toBe(
      '{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Request body too large"}}',
    );
  });
});

describe('murmur surface: stream/watch frames', () => {
  it('writes id (the gateway offset), event, data in order, data byte for byte, live and replayed', async () => {
    const { gw, sim, capsule } = await setup();
    const live = track(await rpcPost(gw.baseUrl, capsule, WATCH));
    await live.waitFor((x) => x.blocks().length >= 1, 'ack');
    await sim.submit('hello there').done;
    const last = sim.written[sim.written.length - 1]!;
    await live.waitFor((x) => x.frames().some((f) => f.data === last.data), 'the completed status');
    const records = await allRecords(gw, capsule);
    const logged = records.filter((r) => r.kind === 'frame');
    expect(logged.map((r) => r.kind === 'frame' && r.data)).toEqual(sim.written.map((w) => w.data));
    const expected = expectedBlocks(records);
    expect(expected.filter((b) => b.startsWith('id: '))).toEqual(
      logged.map((r) => r.kind === 'frame' && `id: ${r.offset}\nevent: ${r.event}\ndata: ${r.data}`),
    );
    expect(live.blocks().slice(1)).toEqual(expected);
    // A new watcher replays the same bytes after its ack (from 0: the whole log).
    const replay = track(await rpcPost(gw.baseUrl, capsule, WATCH));
    await replay.waitFor((x) => x.blocks().length >= 1 + expected.length, 'the replay');
    expect(replay.blocks()).toEqual([ACK_STATELESS, ...expected]);
    // Resuming from an offset replays exactly what follows it.
    const from = logged[2]!.offset;
    const resumed = track(await rpcPost(gw.baseUrl, capsule, WATCH, { 'Last-Event-ID': String(from) }));
    const rest = expectedBlocks(records.filter((r) => r.offset > from));
    await resumed.waitFor((x) => x.blocks().length >= 1 + rest.length, 'the resumed replay');
    expect(resumed.blocks()).toEqual([ACK_STATELESS, ...rest]);
  });

  it('treats a Last-Event-ID that is not a number as 0', async () => {
    const { gw, sim, capsule } = await setup();
    await sim.submit('one').done;
    const n = sim.written.length;
    await waitForRecord(gw, capsule, (r) => r.kind === 'frame' && r.data === sim.written[n - 1]!.data);
    const s = track(await rpcPost(gw.baseUrl, capsule, WATCH, { 'Last-Event-ID': 'abc' }));
    await s.waitFor((x) => x.frames().filter((f) => f.id !== null).length >= n, 'the replay');
    expect(
      s
        .frames()
        .filter((f) => f.id !== null)
        .map((f) => f.data),
    ).toEqual(sim.written.map((w) => w.data));
  });

  it('writes a heartbeat every heartbeatMs on stream/watch', async () => {
    const { gw, capsule } = await setup({}, { config: { heartbeatMs: 50 } });
    const s = track(await rpcPost(gw.baseUrl, capsule, WATCH));
    await s.waitFor((x) => x.blocks().filter((b) => b === ':heartbeat').length >= 3, 'three heartbeats');
    expect(s.body().startsWith(`${ACK_STATELESS}\n\n`)).toBe(true);
    expect(s.body()).toContain('\n\n:heartbeat\n\n');
  });

  it('forwards frame types it does not know unchanged, with or without an id', async () => {
    const { gw, capsule } = await setup();
    const s = track(await rpcPost(gw.baseUrl, capsule, WATCH));
    await s.waitFor((x) => x.blocks().length >= 1, 'ack');
    const a = await gw.writer.append(capsule, {
      kind: 'frame',
      event: 'plan',
      upstreamId: '12',
      data: '{"id":"tsk_1","steps":["a"],"new_key":{"x":1}}',
      receivedAt: Date.now(),
    });
    await gw.writer.append(capsule, {
      kind: 'frame',
      event: 'notice',
      upstreamId: null,
      data: '{"k":true}',
      receivedAt: Date.now(),
    });
    // (A cold-attach gap may come first or between: the ingestor's facts are not this test's.)
    const blocks = (): string[] => s.blocks().filter((b) => !b.startsWith('event: gap\n'));
    await s.waitFor(() => blocks().length >= 3, 'the two frames');
    expect(blocks().slice(1)).toEqual([
      `id: ${a.offset}\nevent: plan\ndata: {"id":"tsk_1","steps":["a"],"new_key":{"x":1}}`,
      'event: notice\ndata: {"k":true}',
    ]);
  });
});
