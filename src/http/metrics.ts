/**
 * Prometheus metrics. Gauges are collected at scrape time from the core's status (nothing on the hot
 * path); counters are bumped by the few places that own the events.
 */
import { Registry, Gauge, Counter, collectDefaultMetrics } from 'prom-client';
import type { GatewayCore } from '../core/types.js';
import { unexpectedErrorCounts } from './unexpected-errors.js';
import { hostMetrics, registerLocalMetrics } from './host-metrics.js';
import type { LatencyMetrics } from '../core/latency.js';

export interface MetricsRegistry {
  readonly contentType: string;
  render(): Promise<string>;
  /** Downstream connections opened, by surface. */
  readonly connectionsOpened: Counter<'surface'>;
}

/** Internal counters of the hub and the log writer, read at scrape time. */
export interface InternalStats {
  hub: { tailLoops: number; subscribers: number; waiters: number };
  writer: { queued: number; dropped: number; batches: number; failures: number };
}

export const createMetrics = (
  core: GatewayCore,
  connections: () => Record<string, Record<string, number>>,
  internals?: () => InternalStats,
  latency?: LatencyMetrics,
): MetricsRegistry => {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'murmur_gateway_' });
  // Observed by the dispatcher and the hub (src/core/latency.ts), registered here.
  for (const h of latency?.all ?? []) registry.registerMetric(h);

  // Per-capsule gauges are filled from one read of every capsule's status per scrape (render), not
  // one read per gauge: each status costs a store round trip.
  const perCapsule = (name: string, help: string) =>
    new Gauge({ name: `murmur_gateway_${name}`, help, labelNames: ['capsule'], registers: [registry] });
  const head = perCapsule('log_head_offset', 'Highest offset in the capsule log');
  const connected = perCapsule('upstream_connected', '1 when the upstream stream/watch is connected');
  const reconnects = perCapsule('upstream_reconnects', 'Upstream reconnections since start');
  const release = new Gauge({
    name: 'murmur_gateway_upstream_release_info',
    help: "1 for the capsule's release line and session as last connected",
    labelNames: ['capsule', 'release', 'session'],
    registers: [registry],
  });
  const unauthorized = perCapsule(
    'upstream_unauthorized',
    "1 while the capsule's door refuses the gateway's token",
  );
  const queueDepth = perCapsule('queue_depth', 'Submissions waiting in the capsule submission queue');
  const queueOldest = perCapsule('queue_oldest_seconds', 'How long the oldest queued submission has waited');
  const possiblyMissing = perCapsule(
    'frames_possibly_missing',
    'frames-possibly-missing facts the capsule log has recorded (loss the gateway knows of)',
  );
  const collectCapsules = async (): Promise<void> => {
    const statuses = await core.statuses();
    release.reset();
    for (const s of statuses) {
      unauthorized.set({ capsule: s.id }, s.reason === 'unauthorized' ? 1 : 0);
      if (s.release) release.set({ capsule: s.id, release: s.release, session: s.sessionId ?? '' }, 1);
      head.set({ capsule: s.id }, s.position.head);
      connected.set({ capsule: s.id }, s.state === 'connected' ? 1 : 0);
      reconnects.set({ capsule: s.id }, s.reconnects);
      queueDepth.set({ capsule: s.id }, s.queue.depth);
      queueOldest.set({ capsule: s.id }, s.queue.oldestMs / 1000);
      possiblyMissing.set({ capsule: s.id }, s.possiblyMissing);
    }
  };
  new Gauge({
    name: 'murmur_gateway_open_connections',
    help: 'Open downstream connections',
    labelNames: ['capsule', 'surface'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [capsule, bySurface] of Object.entries(connections())) {
        for (const [surface, n] of Object.entries(bySurface)) this.set({ capsule, surface }, n);
      }
    },
  });
  if (internals) {
    const gauge = (name: string, help: string, read: (s: InternalStats) => number): void => {
      new Gauge({
        name: `murmur_gateway_${name}`,
        help,
        registers: [registry],
        collect() {
          this.set(read(internals()));
        },
      });
    };
    gauge('hub_tail_readers', 'Store readers (one per capsule with listeners)', (s) => s.hub.tailLoops);
    gauge('hub_subscribers', 'Live subscribers', (s) => s.hub.subscribers);
    gauge('hub_waiters', 'Parked long-polls', (s) => s.hub.waiters);
    gauge('log_pending_appends', 'Entries queued or in flight to the store', (s) => s.writer.queued);
    gauge(
      'log_dropped_frames',
      'Frames dropped while the store was unavailable (each run recorded as a fact)',
      (s) => s.writer.dropped,
    );
    gauge('log_batches', 'Batches made durable', (s) => s.writer.batches);
    gauge('log_store_failures', 'Failed store calls (retried)', (s) => s.writer.failures);
  }
  const connectionsOpened = new Counter({
    name: 'murmur_gateway_connections_opened_total',
    help: 'Downstream connections opened',
    labelNames: ['surface'],
    registers: [registry],
  });

  new Counter({
    name: 'murmur_gateway_unexpected_errors_total',
    help: 'Unexpected failures: a request answered 500, or a rejection or exception nothing handled',
    labelNames: ['where'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [where, n] of Object.entries(unexpectedErrorCounts())) this.inc({ where }, n);
    },
  });

  const localRender = async (): Promise<string> => {
    await collectCapsules();
    return registry.metrics();
  };
  // A worker of a multi-worker host answers the primary's collections with its own view.
  registerLocalMetrics(localRender);

  return {
    contentType: registry.contentType,
    render: () => hostMetrics(localRender),
    connectionsOpened,
  };
};
