/**
 * A plain in-memory capsule log behind the slice of GatewayCore the Flue reader and live feed use
 * (position, cursorStatus, read, readContext, contextFirst, subscribe): `visible` records are in
 * the log, the test hands the subscriber batches itself. readContext answers a context's records
 * plus the unattributed ones, as the core's context index does, and counts what it returned.
 */
import { ContextTracker } from '../../../src/log/frame-view.js';
import type { GatewayCore, SubscribeOptions } from '../../../src/core/types.js';
import type { LogRecord } from '../../../src/log/record.js';

export const EPOCH = 3;

/** The slice of GatewayCore the feed and the reader use, over an array; `visible` records are in the log. */
export const logCore = (records: LogRecord[]) => {
  let visible = 0;
  let subscriber: SubscribeOptions | null = null;
  const counts = { contextRecords: 0 };
  const position = () => ({ epoch: EPOCH, first: 1, head: records[visible - 1]?.offset ?? 0 });
  // The context each record belongs to (null: none), as the core's context index attributes them.
  const tracker = new ContextTracker();
  const contexts = records.map((r) => tracker.contextOf(r));
  const ofContext = (id: string) => (_r: LogRecord, i: number) =>
    i < visible && (contexts[i] === null || contexts[i] === id);
  const core = {
    position: async () => position(),
    cursorStatus: async () => ({ status: 'ok' as const, position: position() }),
    read: async (_capsule: string, after: number, limit: number) => ({
      records: records
        .slice(0, visible)
        .filter((r) => r.offset > after)
        .slice(0, limit),
      position: position(),
    }),
    readContext: async (_capsule: string, id: string, after: number, limit: number) => {
      const page = records.filter(ofContext(id)).filter((r) => r.offset > after);
      const cut = page.length > limit;
      const out = page.slice(0, limit);
      counts.contextRecords += out.length;
      return {
        records: out,
        next: cut ? out[out.length - 1]!.offset : Math.max(after, position().head),
        position: position(),
      };
    },
    contextFirst: async (_capsule: string, id: string) =>
      records.find((r, i) => ofContext(id)(r, i) && contexts[i] === id)?.offset ?? null,
    subscribe: (_capsule: string, options: SubscribeOptions) => {
      subscriber = options;
      return { close: () => (subscriber = null) };
    },
    shutdownSignal: new AbortController().signal,
  } as unknown as GatewayCore;
  return {
    core,
    counts,
    get visible() {
      return visible;
    },
    append: (n: number) => (visible = Math.min(records.length, visible + n)),
    /** Hand the subscriber the records from `from` (index) to what is visible, as one batch. */
    deliver: async (from: number) => {
      const batch = records.slice(from, visible);
      if (batch.length > 0) await subscriber!.onRecords(batch);
      return visible;
    },
  };
};
