/**
 * One projection of a channel shared by every stream in the same state (channel-feed.ts): each
 * record is projected once, each envelope encoded once, and the same Buffers go to every listener.
 */
import type { LogRecord } from '../../src/log/record.js';
import type { ChannelListener } from './channel-listener.js';
import { encodeStep } from './channel-listener.js';
import type { ChannelProjector } from './projection.js';

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
    const encoded = step.envelopes.length > 0 ? encodeStep(step) : [];
    const after = this.projector.latestOffset;
    for (const l of this.listeners) l.onRecord(record, step, encoded, before, after);
    if (step.end) this.ended = true;
  }
}
