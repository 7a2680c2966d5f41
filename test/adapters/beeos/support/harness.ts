/**
 * A BeeOS test gateway: the real MemoryStore, Hub and GatewayCoreImpl, createBeeosRoutes served on
 * 127.0.0.1, and a scripted capsule (UpstreamPort) that writes Murmur frames into the log: beside
 * the startTestGateway + simulator conformance run, for cases a simulator cannot script.
 */
import { randomUUID } from 'node:crypto';
import type { Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import pino from 'pino';
import { createBeeosRoutes } from '../../../../adapters/beeos/index.js';
import { hashApiKey } from '../../../support/api-keys.js';
import { Hono } from 'hono';
import { createAuthenticator, createKeyRing } from '../../../../src/auth/authenticator.js';
import { createAuthMiddleware } from '../../../../src/http/auth-middleware.js';
import { GatewayCoreImpl } from '../../../../src/core/gateway-core.js';
import type { UpstreamPort } from '../../../../src/core/gateway-core.js';
import type { CancelOutcome, SubmitOutcome } from '../../../../src/core/types.js';
import type { AdapterConfig } from '../../../../src/http/adapter-deps.js';
import { Hub } from '../../../../src/hub/hub.js';
import type { FactEntry, FrameEntry } from '../../../../src/log/record.js';
import { MemoryStore } from '../../../../src/log/memory-store.js';
import { configSchema } from '../../../../src/config/schema.js';
import { adapterConfigOf } from '../../../../src/gateway.js';

export const KEY_ALICE = `oag_${'a1'.repeat(32)}`;
export const KEY_BOB = `oag_${'b2'.repeat(32)}`;
export const KEY_UNKNOWN = `oag_${'c3'.repeat(32)}`;

/** Script of a simulated task, chosen by message text `#script {json}` (else a short echo). */
export interface Script {
  chunks?: number;
  thinking?: number;
  tools?: number;
  fail?: string;
  input?: string;
  hold?: boolean;
  delayMs?: number;
}

export interface Harness {
  baseUrl: string;
  capsule: string;
  store: MemoryStore;
  hub: Hub;
  core: GatewayCoreImpl;
  /** Upstream behaviour for the next submissions. */
  mode: { busy: boolean; unreachable: boolean };
  /** Resolves with the final response when the task of `contextId` ends. */
  taskDone(contextId: string): Promise<string>;
  shutdown(): void;
  closeCapsuleStream(): Promise<void>;
  close(): Promise<void>;
}

export const replyOf = (text: string, s: Script): string =>
  s.chunks ? Array.from({ length: s.chunks }, (_, i) => `w${i} `).join('') : `Echo: ${text}`;

export const startHarness = async (
  opts: {
    keys?: boolean;
    config?: Partial<AdapterConfig>;
    maxRecords?: number;
    invokeTimeoutMs?: number;
    maxQueuedBytes?: number;
  } = {},
): Promise<Harness> => {
  const capsule = `cap-${randomUUID().slice(0, 8)}`;
  const store = new MemoryStore({ maxRecords: opts.maxRecords ?? 0, maxAgeMs: 0 });
  const logger = pino({ level: 'silent' });
  const hub = new Hub(store, { logger, dissolveMs: 50 });
  const shutdown = new AbortController();
  const mode = { busy: false, unreachable: false };
  const done = new Map<string, { resolve: (r: string) => void; promise: Promise<string> }>();
  const waiterFor = (ctx: string) => {
    let w = done.get(ctx);
    if (!w) {
      let resolve!: (r: string) => void;
      const promise = new Promise<string>((r) => (resolve = r));
      w = { resolve, promise };
      done.set(ctx, w);
    }
    return w;
  };
  const held = new Map<string, () => void>();
  const write = async (entry: FrameEntry | FactEntry) => {
    await store.append(capsule, [entry]);
  };
  let seq = 0;
  const frame = (event: string, data: unknown): FrameEntry => ({
    kind: 'frame',
    event,
    upstreamId: String(seq++),
    data: JSON.stringify(data),
    receivedAt: Date.now(),
  });
  const run = async (taskId: string, ctx: string, text: string, s: Script) => {
    const pause = () => new Promise((r) => setTimeout(r, s.delayMs ?? 0));
    const st = (state: string, message: string, final = false, extra: object = {}) =>
      frame('status', { id: taskId, context_id: ctx, status: { state, message, ...extra }, final });
    await write(st('working', 'inference turn 1'));
    if (s.hold) {
      await new Promise<void>((r) => held.set(taskId, r));
      await write(st('canceled', 'task canceled', true));
      waiterFor(ctx).resolve('');
      return;
    }
    for (let i = 0; i < (s.thinking ?? 1); i++)
      await write(frame('thinking', { id: taskId, text: `hmm${i} `, final: false }));
    for (let i = 0; i < (s.tools ?? 0); i++) {
      const artifact = {
        tool_name: 'bash',
        content: `out${i}`,
        fence_source: 'tool:bash',
        tool_call_id: `toolu_${i}`,
        is_error: false,
        duration_ms: 3,
        exit_code: 0,
        truncated: false,
      };
      await write(frame('artifact', { id: taskId, artifact }));
    }
    if (s.input) {
      await write(
        frame('status', { id: taskId, status: { state: 'input-required', message: s.input }, final: false }),
      );
      await write(
        frame('status', { id: taskId, status: { state: 'working', message: 'resumed' }, final: false }),
      );
    }
    if (s.fail) {
      await write(st('failed', s.fail, true));
      waiterFor(ctx).resolve(s.fail);
      return;
    }
    const reply = replyOf(text, s);
    const pieces = s.chunks ? reply.split(/(?<= )/) : [reply.slice(0, 3), reply.slice(3)];
    for (const p of pieces) {
      await write(frame('text', { id: taskId, text: p, final: false }));
      await pause();
    }
    await write(frame('text', { id: taskId, text: '', final: true }));
    await write(st('completed', 'session ended', true, { response: reply }));
    waiterFor(ctx).resolve(reply);
  };
  const upstream: UpstreamPort = {
    url: 'http://127.0.0.1:1/',
    state: () => ({ state: 'connected', lastFrameAt: null, reconnects: 0, ack: null }),
    submit: async (req): Promise<SubmitOutcome> => {
      if (mode.unreachable) return { kind: 'unreachable', reason: 'connect ECONNREFUSED' };
      if (mode.busy) return { kind: 'rejected', frame: { id: '0', data: '{"status":{"state":"rejected"}}' } };
      const taskId = `tsk_${randomUUID()}`;
      const m = /^#script (.*)$/s.exec(req.text);
      const script = m ? (JSON.parse(m[1] ?? '{}') as Script) : {};
      waiterFor(req.contextId);
      void run(taskId, req.contextId, req.text, script);
      return { kind: 'accepted', taskId, contextId: req.contextId };
    },
    cancel: async (taskId): Promise<CancelOutcome> => {
      const h = held.get(taskId);
      if (h) {
        held.delete(taskId);
        h();
        return { kind: 'canceled', body: '{}' };
      }
      return { kind: 'not-cancelable', body: '{}' };
    },
    forward: async () => ({ status: 200, contentType: 'application/json', body: '{}' }),
  };
  const core = new GatewayCoreImpl({
    hub,
    writer: {
      append: async (c, e) => {
        const r = await store.append(c, [e]);
        return { offset: r.offsets[0] ?? 0, epoch: r.epoch };
      },
    },
    upstreams: new Map([[capsule, upstream]]),
    shutdownSignal: shutdown.signal,
  });
  // The defaults a user gets, from the one config schema, with these tests' keys and overrides.
  const config: AdapterConfig = { ...adapterConfigOf(configSchema.parse({})), ...opts.config };
  // The tests' two owners' keys (the auth middleware's, as in the gateway); none = anonymous callers.
  const keys = opts.keys
    ? [
        { sha256: hashApiKey(KEY_ALICE), owner: 'alice' },
        { sha256: hashApiKey(KEY_BOB), owner: 'bob' },
      ]
    : [];
  const app = withAuth(
    keys,
    createBeeosRoutes(
      { core, config, logger },
      {
        ...(opts.invokeTimeoutMs ? { invokeTimeoutMs: opts.invokeTimeoutMs } : {}),
        ...(opts.maxQueuedBytes ? { maxQueuedBytes: opts.maxQueuedBytes } : {}),
      },
    ),
  );
  const server = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 });
  await new Promise<void>((r) => server.once('listening', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    capsule,
    store,
    hub,
    core,
    mode,
    taskDone: (ctx) => waiterFor(ctx).promise,
    shutdown: () => shutdown.abort(),
    closeCapsuleStream: () => write({ kind: 'fact', fact: 'capsule-closed', receivedAt: Date.now() }),
    close: async () => {
      shutdown.abort();
      for (const h of held.values()) h();
      (server as HttpServer).closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await hub.close();
      await store.close();
    },
  };
};

/** Routes behind the gateway's auth middleware (src/http/auth-middleware.ts), with these keys (submit). */
export const withAuth = (
  keys: { sha256: string; owner: string }[],
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  routes: Hono<any, any, any>,
): Hono => {
  const app = new Hono();
  app.use(
    '*',
    createAuthMiddleware({
      authenticator: createAuthenticator({
        keys: createKeyRing(keys.map((k) => ({ ...k, scopes: ['submit'], capsules: ['*'] }))),
      }),
    }),
  );
  app.route('/', routes);
  return app;
};
