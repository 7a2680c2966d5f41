/**
 * A surface is one folder plus one line (`src/surfaces.ts`): every route the gateway serves belongs
 * to exactly one surface's prefix, or is one of the core's own routes (ops, tickets, static files).
 * A route mounted outside a surface's prefix, or two surfaces claiming one path, fails here.
 */
import { describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config/schema.js';
import { adapterConfigOf } from '../../src/gateway.js';
import { createHttpApp } from '../../src/http/app.js';
import { surfaceAt } from '../../src/http/surface.js';
import { createLogger } from '../../src/logger.js';
import { MemoryStreamStore } from '../../src/streams/memory-stream-store.js';
import { createSurfaces } from '../../src/surfaces.js';
import { gatewayForFile } from '../support/gateway-for-file.js';

/** The core's own routes (src/http: ops, static; tickets too when auth is on): nothing else is outside. */
const CORE_PATHS = new Set([
  '/',
  '/healthz',
  '/readyz',
  '/capsules',
  '/metrics',
  '/dashboard',
  '/dashboard/:file{[^/]*}',
  '/client/murmur-gateway.js',
]);
/** Middleware the assembly runs on every path (CORS, guards, auth, limits, accounting). */
const EVERYWHERE = new Set(['*', '/*']);

describe('surfaces', () => {
  const rig = gatewayForFile({ simulator: { heartbeatMs: 200 } });

  const surfaces = () => {
    const config = configSchema.parse({ durableStreams: { writable: true } });
    return createSurfaces({
      core: rig.gw.core,
      config: adapterConfigOf(config),
      logger: createLogger('silent'),
      streams: new MemoryStreamStore({ maxStreams: 10 }),
    });
  };

  it('every route of a surface lives under its prefix, and no two surfaces share a prefix', () => {
    const list = surfaces();
    expect(list.map((s) => s.name)).toEqual([
      'murmur',
      'beeos',
      'flue',
      'durable-streams',
      'ai-sdk',
      'a2a',
      'follow',
    ]);
    for (const s of list) {
      // Under the prefix, or the prefix itself without its closing slash (`/v1/stream`).
      for (const r of s.routes.routes)
        expect(`${s.name} ${r.path}`).toMatch(new RegExp(`^${s.name} ${s.prefix.replace(/\/$/, '')}(/|$)`));
      for (const other of list)
        if (other !== s)
          expect(other.prefix.startsWith(s.prefix), `${other.name} inside ${s.name}`).toBe(false);
    }
  });

  it('the assembled app serves nothing outside a surface but the core routes', () => {
    const list = surfaces();
    const { app } = createHttpApp({
      core: rig.gw.core,
      logger: createLogger('silent'),
      corsOrigins: ['http://example.test'],
      storeReady: () => Promise.resolve(true),
      surfaces: list,
    });
    const outside = new Set(
      app.routes.map((r) => r.path).filter((p) => !EVERYWHERE.has(p) && !surfaceAt(list, p)),
    );
    expect([...outside].sort()).toEqual([...CORE_PATHS].sort());
    // Each surface's capsule paths pick out the capsule for the accounting and the stream caps.
    const capsuleOf = (path: string) => surfaceAt(list, path)?.capsulePath?.exec(path)?.[1];
    expect(capsuleOf('/murmur/cap/events')).toBe('cap');
    expect(capsuleOf('/api/v1/agents/cap/tasks')).toBe('cap');
    expect(capsuleOf('/flue/cap/conv')).toBe('cap');
    expect(capsuleOf('/v1/stream/murmur/cap')).toBe('cap');
    expect(capsuleOf('/v1/stream/team/notes')).toBeUndefined();
    expect(capsuleOf('/a2a/cap/')).toBe('cap');
    expect(capsuleOf('/a2a/cap/.well-known/agent-card.json')).toBe('cap');
  });
});
