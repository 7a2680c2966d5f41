/**
 * A replica's cache of general-stream messages it has read or appended (redis-stream-store.ts).
 * Every epoch Redis hands out is new (lib.lua `libMintEpoch`), and a message at (stream, epoch,
 * position) never changes once written, so a cached message stays true for as long as its epoch
 * does: a read still asks Redis for the meta (the fence, the sliding TTL, a delete by another
 * replica) and takes the messages from here only when the whole page is here. A stream's messages
 * are held for one epoch: another one drops them, as a delete or a missing stream does.
 *
 * Bounded by bytes: each put copies its messages into one allocation of its own (a message handed
 * in may be a view of a far larger buffer: a socket read, a request body), counted with a per-message
 * overhead, and the oldest puts go first once the budget is passed.
 *
 * A page asked for again (many readers catching up through the same pages) is handed out as the
 * same array every time, so a caller may keep what it builds from it beside it, for as long as the
 * cache keeps the page (the HTTP surface keeps the response body: one copy for every reader, not
 * one each). Such a page counts its bytes once more, for that.
 */

/** What a cached message costs beside its bytes: its view object and its map entry (an estimate). */
export const MESSAGE_OVERHEAD = 128;
/** What a kept page costs beside its messages' bytes (counted again, for what a caller builds from it). */
const PAGE_OVERHEAD = 256;
/** A stream's pages asked for once, remembered so the second asking keeps the page (per stream). */
const ONCE_KEYS = 32;

interface Chunk {
  kind: 'chunk';
  stream: CachedStream;
  /** Positions from..to were offered; a position already cached stayed with its older chunk. */
  from: number;
  to: number;
  /** The one allocation this chunk's messages are views of: a message is this chunk's if it shares it. */
  backing: ArrayBufferLike;
  cost: number;
}

/** A page handed out more than once: the same array each time. */
interface Page {
  kind: 'page';
  stream: CachedStream;
  key: string;
  entries: Buffer[];
  cost: number;
}

interface CachedStream {
  path: string;
  epoch: number;
  messages: Map<number, Buffer>;
  chunks: Set<Chunk>;
  pages: Map<string, Page>;
  /** Pages asked for once (oldest first): asked again, they are kept. */
  once: Set<string>;
}

export class MessageCache {
  private readonly streams = new Map<string, CachedStream>();
  /** Every chunk and kept page, oldest first (a Set keeps insertion order). */
  private readonly order = new Set<Chunk | Page>();
  private held = 0;

  /** `budget`: bytes the cache may hold at most (messages and their overhead); 0 holds nothing. */
  constructor(private readonly budget: number) {}

  /** Bytes held now, overhead included; never above the budget. */
  get bytes(): number {
    return this.held;
  }

  /** The stream's current epoch: messages of another one are dropped. */
  epochIs(path: string, epoch: number): void {
    const s = this.streams.get(path);
    if (s && s.epoch !== epoch) this.drop(path);
  }

  /** The stream is gone (deleted, expired, not found): nothing of it is served again. */
  drop(path: string): void {
    const s = this.streams.get(path);
    if (!s) return;
    for (const item of [...s.chunks, ...s.pages.values()]) {
      this.order.delete(item);
      this.held -= item.cost;
    }
    this.streams.delete(path);
  }

  /** Whether the message at `position` of this epoch is here (a read from it may be served here). */
  has(path: string, epoch: number, position: number): boolean {
    const s = this.streams.get(path);
    return s !== undefined && s.epoch === epoch && s.messages.has(position);
  }

  /**
   * `entries` are the messages at positions first, first + 1, … of the stream's `epoch`, as Redis
   * holds them. Copied: the caller's buffers are not kept. A put larger than the whole budget is not kept.
   */
  put(path: string, epoch: number, first: number, entries: readonly Buffer[]): void {
    if (this.budget <= 0 || entries.length === 0) return;
    let s = this.streams.get(path);
    if (s && s.epoch !== epoch) {
      this.drop(path);
      s = undefined;
    }
    let bytes = 0;
    let count = 0;
    for (let i = 0; i < entries.length; i++) {
      if (s?.messages.has(first + i)) continue;
      bytes += entries[i]!.length;
      count++;
    }
    const cost = bytes + count * MESSAGE_OVERHEAD;
    if (count === 0 || cost > this.budget) return;
    if (!s) {
      s = { path, epoch, messages: new Map(), chunks: new Set(), pages: new Map(), once: new Set() };
      this.streams.set(path, s);
    }
    const backing = Buffer.allocUnsafeSlow(bytes);
    let at = 0;
    for (let i = 0; i < entries.length; i++) {
      if (s.messages.has(first + i)) continue;
      const e = entries[i]!;
      e.copy(backing, at);
      s.messages.set(first + i, backing.subarray(at, at + e.length));
      at += e.length;
    }
    const chunk: Chunk = {
      kind: 'chunk',
      stream: s,
      from: first,
      to: first + entries.length - 1,
      backing: backing.buffer,
      cost,
    };
    s.chunks.add(chunk);
    this.hold(chunk);
  }

  /**
   * The page a read of the store answers, if every message of it is here: messages after `after`,
   * at most `limit` (the caller's bound and the tail), cut at `maxBytes` as every store cuts a page
   * (at least one message, however large). Null: some message of the page is not here. Read-only:
   * the same page asked for again may be the same array.
   */
  page(path: string, epoch: number, after: number, limit: number, maxBytes: number): Buffer[] | null {
    const s = this.streams.get(path);
    if (!s || s.epoch !== epoch) return null;
    const out: Buffer[] = [];
    let bytes = 0;
    for (let position = after + 1; out.length < limit; position++) {
      const e = s.messages.get(position);
      if (!e) return null;
      if (out.length > 0 && bytes + e.length > maxBytes) break;
      bytes += e.length;
      out.push(e);
    }
    // The same messages, whatever bounds cut them: one page.
    const key = `${after}:${out.length}`;
    const kept = s.pages.get(key);
    if (kept) return kept.entries;
    if (!s.once.delete(key)) {
      s.once.add(key);
      if (s.once.size > ONCE_KEYS) s.once.delete(s.once.values().next().value!);
      return out;
    }
    const cost = bytes + PAGE_OVERHEAD;
    if (cost <= this.budget) {
      const page: Page = { kind: 'page', stream: s, key, entries: out, cost };
      s.pages.set(key, page);
      this.hold(page);
    }
    return out;
  }

  /**
   * Counts `item` in, then evicts the oldest until the budget holds (it fits alone, so it stays,
   * unless it is a page whose stream loses a chunk on the way).
   */
  private hold(item: Chunk | Page): void {
    this.order.add(item);
    this.held += item.cost;
    for (const old of this.order) {
      if (this.held <= this.budget) break;
      this.evict(old);
    }
  }

  private evict(item: Chunk | Page): void {
    const s = item.stream;
    this.order.delete(item);
    this.held -= item.cost;
    if (item.kind === 'page') {
      s.pages.delete(item.key);
      return;
    }
    s.chunks.delete(item);
    for (let position = item.from; position <= item.to; position++) {
      if (s.messages.get(position)?.buffer === item.backing) s.messages.delete(position);
    }
    // A kept page may hold messages of this chunk: the stream's pages go with it.
    for (const page of s.pages.values()) {
      this.order.delete(page);
      this.held -= page.cost;
    }
    s.pages.clear();
    if (s.chunks.size === 0) this.streams.delete(s.path);
  }
}
