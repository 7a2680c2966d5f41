/**
 * The BeeOS v3 envelope and the shapes the projection produces (BeeOS "Streaming" §3), plus
 * the deterministic message ids replays rely on. The projection itself is in projection.ts.
 */
import { createHash } from 'node:crypto';
import type { EndReason } from './constants.js';

export type EnvelopeState = 'streaming' | 'completed' | 'failed' | 'refused' | 'cancelled';
export type StopReason = 'end_turn' | 'error' | 'refused' | 'user_stop' | 'agent_lost';
export type TaskStatus =
  'queued' | 'running' | 'input_required' | 'completed' | 'failed' | 'canceled' | 'rejected';

export type Part = Record<string, unknown> & { type: string };

export interface Envelope {
  type: string;
  message_id: string;
  offset: number;
  in_reply_to?: string;
  publisher_id: string;
  state: EnvelopeState;
  stop_reason?: StopReason;
  body?: string;
  parts?: Part[];
  payload?: unknown;
  created_at: string;
  updated_at: string;
}

export interface Projected {
  /** Built on first use for a chunk (projection.ts): most streams never show deltas. */
  readonly envelope: Envelope;
  /** `envelope.offset`, readable without building the envelope. */
  readonly offset: number;
  /** A legacy per-token chunk: shown only with include_deltas. */
  readonly delta: boolean;
  /** The envelope's SSE frame when the projector writes it cheaper than encoding the envelope (reply-bytes.ts). */
  bytes?(): Buffer;
}

/** A projected envelope other than a chunk. */
export const projected = (envelope: Envelope): Projected => ({
  envelope,
  offset: envelope.offset,
  delta: false,
});

export interface ProjectionStep {
  envelopes: Projected[];
  /** Set when this record ends the channel's stream (task terminal or channel closed). */
  end?: EndReason;
}

export interface ChannelSpec {
  kind: 'task' | 'conversation';
  agentId: string;
  contextId: string;
  owner: string;
  /**
   * Capsule task ids known to belong to the channel (accepted submissions): their frames without
   * `context_id` stay attributed when the task's first frame has aged out of retention.
   */
  taskIds?: readonly string[];
}

/** A deterministic UUID-shaped id: replays and reconnects see the same message_id. */
export const stableUuid = (...parts: (string | number)[]): string => {
  const h = createHash('sha256').update(parts.join('\u0000')).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
};
