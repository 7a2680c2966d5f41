/**
 * One projection of a channel shared by every stream in the same state (channel-feed.ts): each
 * record is projected once, each envelope encoded at most once (when a listener shows it), and the
 * same Buffers go to every listener.
 */
import type { LogRecord } from '../../src/log/record.js';
import type { ChannelListener, EncodedStep } from './channel-listener.js';
import type { ChannelProjector } from './projection.js';

/** The encodings of a step without envelopes: nothing is ever written to it. */
const NONE: EncodedStep = [];

export class SharedProjection {
  readonly listeners = new Set<ChannelListener>();
  ended = false;

  constructor(
    readonly channelId: string,
    readonly contextId: string,
    readonly projector: ChannelProjector,
  ) {}

  onRecord(record: LogRecord): void {
    const before = this.projector.latestOffset;
    const step = this.projector.project(record);
    const encoded: EncodedStep = step.envelopes.length > 0 ? [] : NONE;
    const after = this.projector.latestOffset;
    for (const l of this.listeners) l.onRecord(record, step, encoded, before, after);
    if (step.end) this.ended = true;
  }
}
