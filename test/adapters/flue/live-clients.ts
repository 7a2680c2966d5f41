/**
 * Raw Flue live readers for the shared-projection tests: an SSE connection parsed into its data
 * and control events, and a long-poll loop, each keeping every chunk it received in order.
 */
import type { FlueChunk } from '../../../adapters/flue/chunks.js';
import { ConversationProjector } from '../../../adapters/flue/projection.js';
import type { GatewayCore } from '../../../src/core/types.js';

export const offsetNumber = (offset: string): number => (offset === '-1' ? 0 : Number(offset.split('_')[1]));

type Control = { streamNextOffset: string; upToDate?: true };

/**
 * The old path, kept as the oracle: one projector over every record of the capsule; the chunks of
 * records in (after, through], as a client receives them (through JSON: no undefined fields).
 */
export const wholeCapsuleChunks = async (
  core: GatewayCore,
  capsule: string,
  conversationId: string,
  after: number,
  through: number,
): Promise<FlueChunk[]> => {
  const projector = new ConversationProjector(conversationId, (await core.position(capsule)).epoch);
  const chunks: FlueChunk[] = [];
  let cursor = 0;
  while (cursor < through) {
    const { records } = await core.read(capsule, cursor, 1000);
    if (records.length === 0) break;
    for (const record of records) {
      if (record.offset > through) break;
      const out = projector.project(record);
      if (record.offset > after) chunks.push(...out);
      cursor = record.offset;
    }
  }
  return JSON.parse(JSON.stringify(chunks)) as FlueChunk[];
};

export class SseReader {
  readonly chunks: FlueChunk[] = [];
  /** Event names in arrival order ('data' | 'control'), to check a control follows every data. */
  readonly events: string[] = [];
  last: Control | null = null;
  ended = false;
  private readonly stop = new AbortController();
  private waiters: { offset: number; resolve: () => void }[] = [];
  private endWaiters: (() => void)[] = [];
  readonly done: Promise<void>;

  constructor(
    url: string,
    readonly offset: string,
  ) {
    this.done = this.run(`${url}?view=updates&offset=${offset}&live=sse`);
  }

  get next(): number {
    return this.last ? offsetNumber(this.last.streamNextOffset) : offsetNumber(this.offset);
  }

  /** Resolves once a control event reports `offset` (or later). */
  reached(offset: number): Promise<void> {
    if (this.next >= offset) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ offset, resolve }));
  }

  /** Resolves when the server ends the stream. */
  closed(): Promise<void> {
    if (this.ended) return Promise.resolve();
    return new Promise((resolve) => this.endWaiters.push(resolve));
  }

  close(): void {
    this.stop.abort();
  }

  private async run(url: string): Promise<void> {
    try {
      const res = await fetch(url, { signal: this.stop.signal });
      if (res.status !== 200) throw new Error(`SSE status ${res.status}`);
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
        let cut: number;
        while ((cut = text.indexOf('\n\n')) >= 0) {
          this.event(text.slice(0, cut));
          text = text.slice(cut + 2);
        }
      }
    } catch (err) {
      if (!this.stop.signal.aborted) throw err;
    } finally {
      this.ended = true;
      for (const resolve of this.endWaiters.splice(0)) resolve();
    }
  }

  private event(block: string): void {
    if (block.startsWith(':')) return;
    const [eventLine, dataLine] = block.split('\n');
    const name = eventLine!.slice('event: '.length);
    const data = dataLine!.slice('data:'.length);
    this.events.push(name);
    if (name === 'data') this.chunks.push(...(JSON.parse(data) as FlueChunk[]));
    if (name === 'control') {
      this.last = JSON.parse(data) as Control;
      const next = this.next;
      this.waiters = this.waiters.filter((w) => (w.offset <= next ? (w.resolve(), false) : true));
    }
  }
}

/** A long-poll loop from `offset` until its Stream-Next-Offset reaches `until` (as the SDK polls). */
export const longPollUntil = async (
  url: string,
  offset: string,
  until: () => number | null,
  signal?: AbortSignal,
): Promise<{ chunks: FlueChunk[]; next: string }> => {
  const chunks: FlueChunk[] = [];
  let next = offset;
  // Bounded: each answer is at most the long-poll window; `until` is set once the workload ended.
  for (;;) {
    const target = until();
    if (target !== null && offsetNumber(next) >= target) return { chunks, next };
    const res = await fetch(`${url}?view=updates&offset=${next}&live=long-poll`, { signal });
    if (res.status !== 200) throw new Error(`long-poll status ${res.status}`);
    chunks.push(...((await res.json()) as FlueChunk[]));
    next = res.headers.get('stream-next-offset')!;
  }
};
