/**
 * The latency a user of a chat feels, as histograms (names in the gateway contract): admission → the
 * capsule has the task (hand-off), admission → the task's first frame in the log, and a record's
 * append → its bytes written to a client's connection (delivery lag). Observed by the dispatcher and
 * the hub's fan-out; /metrics registers them (src/http/metrics.ts). Labels stay low-cardinality: the
 * surface (murmur, beeos, flue, durable-streams) and the capsule class (its release line), never a
 * capsule, context or task id.
 */
import { Histogram } from 'prom-client';
import type { LogRecord } from '../log/record.js';

/** Seconds: from a millisecond (one replica's hand-off) to ten seconds (a capsule that took long). */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export class LatencyMetrics {
  readonly handoff = new Histogram({
    name: 'murmur_gateway_submission_handoff_seconds',
    help: 'Queued submission: admission to the capsule having the task (its first frame seen)',
    labelNames: ['surface', 'capsule_class'],
    buckets: BUCKETS,
    registers: [],
  });

  readonly firstFrame = new Histogram({
    name: 'murmur_gateway_time_to_first_frame_seconds',
    help: "Queued submission: admission to its task's first frame in the log",
    labelNames: ['surface', 'capsule_class'],
    buckets: BUCKETS,
    registers: [],
  });

  readonly deliveryLag = new Histogram({
    name: 'murmur_gateway_delivery_lag_seconds',
    help: "Live records: receive/append to written to a client's connection, per surface",
    labelNames: ['surface'],
    buckets: BUCKETS,
    registers: [],
  });

  get all(): Histogram[] {
    return [this.handoff, this.firstFrame, this.deliveryLag];
  }
}

/** A capsule's class for the labels: its release line as last connected, or `unknown`. */
export const capsuleClass = (release: string | null | undefined): string => release ?? 'unknown';

/** Milliseconds between two wall-clock times as non-negative seconds (replicas' clocks may differ a little). */
export const secondsBetween = (fromMs: number, toMs: number): number => Math.max(0, toMs - fromMs) / 1000;

/**
 * The hub's fan-out hook for the delivery lag: per surface, one sample per event-loop turn, for the
 * oldest record any live batch of that turn carried to that surface (a capsule streaming a few
 * messages is a batch per turn: a sample per batch; a thousand busy capsules cost a few samples per
 * turn, not one per batch). Taken after the next setImmediate pass, the one in which the SSE
 * streams write what the batches queued to their sockets (src/http/sse-stream.ts).
 */
export const deliveryObserver = (latency: LatencyMetrics) => {
  /** Per surface, the oldest receive time delivered this turn. */
  const oldest = new Map<string, number>();
  const observe = (): void => {
    const now = Date.now();
    for (const [surface, from] of oldest) latency.deliveryLag.observe({ surface }, secondsBetween(from, now));
    oldest.clear();
  };
  return (records: readonly LogRecord[], surfaces: readonly string[]): void => {
    const first = records[0];
    if (!first || surfaces.length === 0) return;
    if (oldest.size === 0) setImmediate(observe);
    const from = first.receivedAt;
    for (const surface of surfaces) {
      const seen = oldest.get(surface);
      if (seen === undefined || from < seen) oldest.set(surface, from);
    }
  };
};
