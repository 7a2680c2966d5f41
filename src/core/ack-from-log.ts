/**
 * The capsule's last `connection-ack` as the LOG holds it (an `upstream-connected` fact), for a
 * replica that does not ingest the capsule and so never read the ack itself. Learnt in the
 * background by a bounded scan of the log's tail, refreshed when older than `maxAgeMs`, and
 * updated by records the core reads anyway. Answers synchronously with what it knows (null first).
 */
import type { LogRecord } from '../log/record.js';
import type { HubPort, UpstreamConnection } from './types.js';

/** How far back from the head the scan looks for the last ack. */
const TAIL_WINDOW = 1000;

/** How soon a scan that found no ack is tried again. */
const UNKNOWN_RETRY_MS = 1000;

interface Known {
  ack: string | null;
  /** What the last `upstream-connected` fact said of the capsule's line, session and card. */
  connection: UpstreamConnection | null;
  /** Offset of the record the ack came from (a later one wins). */
  offset: number;
  learntAt: number;
  learning: boolean;
}

export class AckFromLog {
  private readonly known = new Map<string, Known>();

  constructor(
    private readonly hub: Pick<HubPort, 'position' | 'read'>,
    private readonly maxAgeMs = 30_000,
  ) {}

  /** The last logged ack known for `capsule`, or null; starts (re)learning it when stale. */
  ack(capsule: string): string | null {
    let k = this.known.get(capsule);
    if (!k) {
      k = { ack: null, connection: null, offset: 0, learntAt: 0, learning: false };
      this.known.set(capsule, k);
    }
    if (!k.learning && Date.now() - k.learntAt > this.maxAgeMs) void this.learn(capsule, k);
    return k.ack;
  }

  /** The line, session and card of the last logged connection known for `capsule`, or null. */
  connection(capsule: string): UpstreamConnection | null {
    this.ack(capsule);
    return this.known.get(capsule)!.connection;
  }

  /** Records read through the core: a later `upstream-connected` replaces what is known. */
  observe(capsule: string, records: readonly LogRecord[]): void {
    const k = this.known.get(capsule);
    if (!k) return;
    for (let i = records.length - 1; i >= 0; i--) {
      const r = records[i]!;
      if (r.kind === 'fact' && r.fact === 'upstream-connected') {
        if (r.offset > k.offset) {
          const connection: UpstreamConnection = {
            release: r.release ?? 'spec',
            sessionId: r.sessionId ?? null,
            card: r.card ?? null,
          };
          Object.assign(k, { ack: r.ack, connection, offset: r.offset });
        }
        return;
      }
    }
  }

  private async learn(capsule: string, k: Known): Promise<void> {
    k.learning = true;
    try {
      const { head, first } = await this.hub.position(capsule);
      const { records } = await this.hub.read(capsule, Math.max(first - 1, head - TAIL_WINDOW), TAIL_WINDOW);
      this.observe(capsule, records);
      // Nothing logged yet (the owner's first connection is still on its way): ask again in a second.
      k.learntAt = k.ack === null ? Date.now() - this.maxAgeMs + UNKNOWN_RETRY_MS : Date.now();
    } catch {
      // The store is away: the next ask tries again.
    } finally {
      k.learning = false;
    }
  }
}
