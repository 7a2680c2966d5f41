/**
 * Two ways an SSE stream ends that are not its client's doing, shared by the surfaces: the gateway
 * draining (every stream ends as a capsule going away would; clients resume from their cursor), and
 * a lifetime (Durable Streams §8.2: a server closes each connection after about a minute, so CDNs
 * can collapse readers). Neither costs a listener or a timer per connection.
 */
import type { SseStream } from './sse-stream.js';
import { now, sharedWheel, type WheelEntry } from './timer-wheel.js';

/** Open streams per shutdown signal: one abort listener for all of them, not one each. */
const openBySignal = new WeakMap<AbortSignal, Set<SseStream>>();

/** End `stream` when `shutdown` aborts (at once if it already has). */
export const endOnShutdown = (shutdown: AbortSignal, stream: SseStream): void => {
  if (shutdown.aborted) return stream.end();
  let open = openBySignal.get(shutdown);
  if (!open) {
    const set = new Set<SseStream>();
    open = set;
    openBySignal.set(shutdown, set);
    shutdown.addEventListener('abort', () => [...set].forEach((s) => s.end()), { once: true });
  }
  open.add(stream);
  stream.onClose(() => open.delete(stream));
};

/** Ends its stream when due: an entry on the shared wheel, not a timer each. */
class LifetimeEnd implements WheelEntry {
  wheelDue = 0;
  wheelIndex = -1;
  constructor(private readonly stream: SseStream) {}
  onWheel(): void {
    this.stream.end();
  }
}

/** End `stream` after `lifetimeMs`. */
export const endAfter = (stream: SseStream, lifetimeMs: number): void => {
  const lifetime = new LifetimeEnd(stream);
  sharedWheel.schedule(lifetime, now() + lifetimeMs, lifetimeMs);
  stream.onClose(() => sharedWheel.cancel(lifetime));
};
