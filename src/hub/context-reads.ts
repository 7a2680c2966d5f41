/**
 * Per-context reads (GatewayCore.readContext): one ContextIndex per capsule, kept up to the log head
 * by the capsule channel's tail batches (`fed`) and, for whatever the tail did not bring (the log
 * before the channel started, writes made through another replica since), by page reads from the
 * store, so each record is read and attributed at most once per process and epoch. A read then
 * fetches only its context's offsets, in contiguous runs read concurrently (ioredis pipelines them)
 * or from the channel's recent records. A new epoch, or a log that went backwards, rebuilds the index.
 */
import type { Logger } from 'pino';
import type { ContextPage } from '../core/types.js';
import { GatewayError } from '../errors.js';
import type { LogRecord } from '../log/record.js';
import type { LogPosition, LogStore, ReadResult } from '../log/store.js';
import type { CapsuleChannel } from './capsule-channel.js';
import { ContextIndex } from './context-index.js';

export interface ContextReadsOptions {
  pageSize: number;
  /** An index unused this long is dropped (rebuilt from the store on the next read). */
  idleMs: number;
  logger: Logger;
}

export interface ContextReadsStats {
  /** Capsules with an index in memory. */
  capsules: number;
  contexts: number;
  records: number;
}

/** Offsets closer than this are read as one run (the records between are read and dropped). */
const RUN_GAP = 8;
/** Rebuilds one read may go through (a store flipping epochs under it) before it gives up. */
const MAX_REBUILDS = 4;

interface Entry {
  index: ContextIndex;
  /** Latest position seen with the index's epoch. */
  position: LogPosition | null;
  pulling: Promise<void> | null;
  idle: NodeJS.Timeout;
}

export class ContextReads {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly store: LogStore,
    private readonly channelOf: (capsule: string) => CapsuleChannel | undefined,
    private readonly options: ContextReadsOptions,
  ) {}

  /** A tail batch of `capsule` (records after `after`): indexed at once when it continues the index. */
  fed(capsule: string, after: number, records: readonly LogRecord[], position: LogPosition): void {
    const entry = this.entries.get(capsule);
    if (!entry || entry.index.epoch !== position.epoch) return;
    if (entry.index.feed(after, records)) entry.position = position;
  }

  /** The channel saw the log go backwards: the index describes records that are gone. */
  lost(capsule: string): void {
    const entry = this.entries.get(capsule);
    if (entry) entry.index = new ContextIndex(0);
  }

  async read(
    capsule: string,
    contextId: string,
    after: number,
    limit: number,
    tasks: readonly string[] = [],
  ): Promise<ContextPage> {
    for (let attempt = 0; ; attempt++) {
      const entry = await this.caughtUp(capsule);
      const { index } = entry;
      const position = entry.position!;
      const { offsets, next } = index.select(contextId, after, Math.max(0, limit), position.first, tasks);
      const records = await this.fetch(capsule, index, offsets);
      // A run read saw another epoch: the offsets describe the old one; catch up and select again.
      if (records) return { records, next, position };
      if (attempt >= MAX_REBUILDS) throw unstable(capsule);
    }
  }

  async first(capsule: string, contextId: string): Promise<number | null> {
    const entry = await this.caughtUp(capsule);
    return entry.index.firstOf(contextId, entry.position!.first);
  }

  stats(): ContextReadsStats {
    const stats: ContextReadsStats = { capsules: this.entries.size, contexts: 0, records: 0 };
    for (const { index } of this.entries.values()) {
      const s = index.stats();
      stats.contexts += s.contexts;
      stats.records += s.records;
    }
    return stats;
  }

  close(): void {
    for (const entry of this.entries.values()) clearTimeout(entry.idle);
    this.entries.clear();
  }

  private entry(capsule: string): Entry {
    let entry = this.entries.get(capsule);
    if (entry) {
      entry.idle.refresh();
      return entry;
    }
    const idle = setTimeout(() => this.entries.delete(capsule), this.options.idleMs);
    idle.unref();
    entry = { index: new ContextIndex(0), position: null, pulling: null, idle };
    this.entries.set(capsule, entry);
    return entry;
  }

  /**
   * The capsule's entry, indexed through the head as of this call: one position call (a write
   * acknowledged through another replica is in it), then page reads for whatever is not indexed.
   */
  private async caughtUp(capsule: string): Promise<Entry> {
    const entry = this.entry(capsule);
    const target = await this.store.position(capsule);
    for (;;) {
      if (entry.pulling) {
        await entry.pulling;
        continue;
      }
      const { index, position } = entry;
      if (index.epoch === target.epoch && position) {
        if (index.through === target.head) {
          if (target.first > position.first) entry.position = { ...position, first: target.first };
          return entry;
        }
        if (index.through > target.head) {
          // Indexed past this call's head (the tail, or a later caller's pull, read further): caught
          // up, unless the log went backwards meanwhile. A fresh position tells the two apart.
          const now = await this.store.position(capsule);
          if (entry.index !== index) continue;
          if (now.epoch === index.epoch && now.head >= index.through) {
            if (now.head >= position.head) entry.position = now;
            return entry;
          }
        }
      }
      entry.pulling = this.pull(capsule, entry, target).finally(() => (entry.pulling = null));
      await entry.pulling;
      return entry;
    }
  }

  /** Read pages after `through` until the index reaches `target` (or a page finds nothing more). */
  private async pull(capsule: string, entry: Entry, target: LogPosition): Promise<void> {
    const { pageSize } = this.options;
    let rebuilds = 0;
    for (;;) {
      const after = entry.index.through;
      const page = await this.page(capsule, entry.index, after, pageSize);
      const at = page.position;
      if (at.epoch !== entry.index.epoch || at.head < after) {
        // A fresh store answer in another epoch, or below what was indexed: start over from it.
        if (entry.index.epoch !== 0) {
          this.options.logger.info(
            { capsule, oldEpoch: entry.index.epoch, epoch: at.epoch, head: at.head },
            'context index: rebuilding for a new log epoch',
          );
        }
        if (++rebuilds > MAX_REBUILDS) throw unstable(capsule);
        entry.index = new ContextIndex(at.epoch);
        entry.position = null;
        // A page read from the start is the new index's first page; any other starts mid-log.
        if (after !== 0) continue;
      }
      entry.index.feed(after, page.records);
      if (!entry.position || at.head >= entry.position.head) entry.position = at;
      if (page.records.length === 0) {
        entry.index.reachedHead(at.head);
        return;
      }
      if (at.epoch === target.epoch && entry.index.through >= target.head) return;
    }
  }

  /** A page after `after`: from the channel's memory when it holds it, else from the store. */
  private page(capsule: string, index: ContextIndex, after: number, limit: number): Promise<ReadResult> {
    const channel = this.channelOf(capsule);
    if (channel && index.epoch !== 0 && channel.epoch === index.epoch) {
      const recent = channel.readRecent(after, limit, false);
      if (recent && recent.records.length > 0) return Promise.resolve(recent);
    }
    return this.store.read(capsule, after, limit);
  }

  /**
   * The records at `offsets` (ascending), read as runs of nearby offsets, concurrently. Null when a
   * read answered from another epoch. Offsets trimmed meanwhile are simply missing.
   */
  private async fetch(capsule: string, index: ContextIndex, offsets: number[]): Promise<LogRecord[] | null> {
    if (offsets.length === 0) return [];
    const runs: { from: number; to: number }[] = [];
    for (const offset of offsets) {
      const run = runs[runs.length - 1];
      if (run && offset - run.to <= RUN_GAP) run.to = offset;
      else runs.push({ from: offset, to: offset });
    }
    const channel = this.channelOf(capsule);
    const pages = await Promise.all(
      runs.map(({ from, to }) => {
        const count = to - from + 1;
        if (channel && channel.epoch === index.epoch) {
          const recent = channel.readRecent(from - 1, count, false);
          const last = recent?.records[recent.records.length - 1];
          if (recent && last && last.offset >= to) return Promise.resolve(recent);
        }
        return this.store.read(capsule, from - 1, count);
      }),
    );
    if (pages.some((p) => p.position.epoch !== index.epoch)) return null;
    const records: LogRecord[] = [];
    let k = 0;
    for (const page of pages) {
      for (const record of page.records) {
        while (k < offsets.length && offsets[k]! < record.offset) k++;
        if (offsets[k] === record.offset) records.push(record);
      }
    }
    return records;
  }
}

const unstable = (capsule: string): GatewayError =>
  new GatewayError('store_unavailable', 'the log store changed epochs during a read', { capsule });
