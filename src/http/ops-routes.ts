/**
 * Operations endpoints: liveness, readiness (store reachable), the capsule table and Prometheus
 * metrics. They read the core's status; they change nothing.
 */
import { Hono } from 'hono';
import type { GatewayCore } from '../core/types.js';
import type { OwnerView } from '../fleet/types.js';
import type { MetricsRegistry } from './metrics.js';
import type { AuthPosture } from '../auth/secure-default.js';
import { principalOf, seesCapsule } from '../auth/principal.js';
import { requireScope } from './auth-routes.js';

export interface OpsDeps {
  core: GatewayCore;
  /** Whether the store answers right now. */
  storeReady: () => Promise<boolean>;
  /** Open downstream connections per surface, per capsule. */
  connections: () => Record<string, Record<string, number>>;
  metrics: MetricsRegistry;
  /** Who ingests which capsule (src/fleet); absent = this process, token 0. */
  /** `open`: served without credentials on a network address (auth.open); said on /readyz. */
  authPosture?: AuthPosture;
  ownership?: { replicaId: string; owners(ids: readonly string[]): Promise<Map<string, OwnerView>> };
}

export const createOpsRoutes = (deps: OpsDeps): Hono => {
  const app = new Hono();

  app.get('/healthz', (c) => c.json({ status: 'ok' }));

  app.get('/readyz', async (c) => {
    const ready = await deps.storeReady();
    const auth = deps.authPosture === 'open' ? { auth: 'open' } : {};
    return c.json({ status: ready ? 'ready' : 'store_unreachable', ...auth }, ready ? 200 : 503);
  });

  // Upstream URLs and fleet internals: operators only.
  app.use('/capsules', requireScope('ops'));
  app.use('/metrics', requireScope('ops'));

  app.get('/capsules', async (c) => {
    const connections = deps.connections();
    // An ops key limited to some capsules lists those only (the others do not exist for it).
    const principal = principalOf(c);
    const statuses = (await deps.core.statuses()).filter((s) => seesCapsule(principal, s.id));
    const ids = statuses.map((s) => s.id);
    const owners = (await deps.ownership?.owners(ids)) ?? new Map<string, OwnerView>();
    const capsules = statuses.map((s) => {
      const id = s.id;
      return {
        id: s.id,
        url: s.url,
        upstream: s.state,
        upstream_reason: s.reason ?? null,
        last_frame_at: s.lastFrameAt === null ? null : new Date(s.lastFrameAt).toISOString(),
        reconnects: s.reconnects,
        conversation_mode: s.conversationMode,
        release: s.release,
        session_id: s.sessionId,
        // Name and version: `/capsules` is an operator's table; the A2A card shows the rest.
        card: s.card ? { name: s.card.name, version: s.card.version } : null,
        // null: the store is out of reach from this replica (`store` says so above).
        head_offset: s.position?.head ?? null,
        first_offset: s.position?.first ?? null,
        epoch: s.position?.epoch ?? null,
        frames_possibly_missing: s.possiblyMissing,
        queue_depth: s.queue.depth,
        queue_oldest_ms: s.queue.oldestMs,
        connections: connections[id] ?? {},
        owner: owners.get(id)?.owner ?? (deps.ownership ? null : 'local'),
        fencing_token: owners.get(id)?.fencingToken ?? 0,
      };
    });
    const store = capsules.some((r) => r.head_offset === null) ? 'unreachable' : 'ok';
    return c.json({ replica: deps.ownership?.replicaId ?? 'local', store, capsules });
  });

  app.get('/metrics', async (c) => {
    const body = await deps.metrics.render();
    return c.body(body, 200, { 'content-type': deps.metrics.contentType });
  });

  return app;
};
