/**
 * What the log holds. Every record of a capsule's log is one of three kinds: an upstream frame exactly
 * as received, a fact the gateway itself observed, or a submission made through the gateway.
 * Offsets are minted by the store (`src/log/store.ts`), never here.
 */

/** An upstream SSE frame, byte for byte: `data` is the capsule's one data line, unparsed. */
export interface FrameEntry {
  kind: 'frame';
  /** The SSE `event:` type, e.g. `status`, `text`, `connection-ack` (never stored: see FactEntry). */
  event: string;
  /** The capsule's own `id:` label, as written (a u64 as a decimal string), or null when absent. */
  upstreamId: string | null;
  /** The data line, without the `data: ` prefix. May be invalid JSON (`error` frames). */
  data: string;
  /** Receive time, ms since the Unix epoch. */
  receivedAt: number;
}

/** Why frames may be missing at this point of the log. */
export type MissingReason =
  | 'cold-attach' // first contact: frames written before the capsule's replay buffer are unknown
  | 'gap' // the capsule answered the replay with a `gap` frame
  | 'no-overlap' // the replay shares nothing with the stored tail: more than a buffer was missed
  | 'capsule-restarted' // a new capsule session: the old session's unsent frames are gone
  | 'id-zero-unreplayable' // the replay skipped id-0 frames (each task's first status), by spec
  | 'store-unavailable' // the store was down longer than the writer's queue could hold
  | 'store-reset'; // the store lost records (older snapshot, lagging replica, data loss): a new epoch starts here

export type FactEntry =
  | {
      kind: 'fact';
      fact: 'upstream-connected';
      /** The `connection-ack` data line, byte for byte. */
      ack: string;
      /** Which (re)connection of this gateway process this is, from 1. */
      attempt: number;
      receivedAt: number;
    }
  | { kind: 'fact'; fact: 'upstream-lost'; reason: string; receivedAt: number }
  | {
      kind: 'fact';
      fact: 'frames-possibly-missing';
      reason: MissingReason;
      /** How many frames are known to be lost, when the gateway knows (store-unavailable). */
      count?: number;
      /** The capsule's `first_available_id` when the reason is a `gap` frame. */
      firstAvailableId?: string;
      receivedAt: number;
    }
  | { kind: 'fact'; fact: 'capsule-closed'; receivedAt: number }
  | { kind: 'fact'; fact: 'capsule-session-started'; reason: string; receivedAt: number }
  | {
      kind: 'fact';
      fact: 'submission-failed';
      /** The failed submission's `messageId`: it was never forwarded upstream. */
      messageId: string;
      /** Why, e.g. `store-unavailable`: its client was told it failed before its record was durable. */
      reason: string;
      receivedAt: number;
    };

export type SurfaceName = 'murmur' | 'beeos' | 'flue';

/** A task submitted through the gateway, recorded before it is forwarded upstream. */
export interface SubmissionEntry {
  kind: 'submission';
  protocol: SurfaceName;
  /** Owner of the submission (BeeOS key owner) or null when the surface has no owners. */
  owner: string | null;
  contextId: string;
  /** The A2A messageId sent upstream. */
  messageId: string;
  /** The message text as sent to the capsule. */
  text: string;
  /** Surface-specific facts (Flue submissionId, signal tag, BeeOS task id, …), JSON-serialisable. */
  meta?: Record<string, unknown>;
  receivedAt: number;
}

export type LogEntry = FrameEntry | FactEntry | SubmissionEntry;

/** An entry as stored: with its offset, an integer from 1, strictly increasing within one epoch. */
export type LogRecord = LogEntry & { offset: number };

let isoMs = NaN;
let isoText = '';
/**
 * A receive time as ISO 8601 (what the surfaces show). Frames read from one socket chunk share
 * their millisecond, so the last one formatted is kept: projections format one per record.
 */
export const receivedIso = (ms: number): string => {
  if (ms !== isoMs) {
    isoText = new Date(ms).toISOString();
    isoMs = ms;
  }
  return isoText;
};

/** Serialise an entry for a store that keeps strings (Redis). The offset is not part of it. */
export const encodeEntry = (entry: LogEntry): string => JSON.stringify(entry);

/**
 * The record `decodeRecord(encoded, offset)` gives for an entry just encoded as `encoded`, for a
 * store answering its own appends. A frame (strings, null and a number: the JSON round trip is the
 * identity) is copied field by field instead of parsed: the Redis store does this for every frame
 * it appends, and a JSON.parse per frame showed in every ingest profile.
 */
export const recordOf = (entry: LogEntry, encoded: string, offset: number): LogRecord =>
  entry.kind === 'frame' ? frameRecord(entry, offset) : decodeRecord(encoded, offset);

/**
 * A frame's record as one literal: every frame record shares one hidden class. A spread copy
 * (`{ ...entry, offset }`) built them field by field, and frozen, each paid V8's map transitions
 * at runtime (a tenth of the embedded store's ingest in a profile).
 */
export const frameRecord = (entry: FrameEntry, offset: number): LogRecord => ({
  kind: 'frame',
  event: entry.event,
  upstreamId: entry.upstreamId,
  data: entry.data,
  receivedAt: entry.receivedAt,
  offset,
});

/** Inverse of encodeEntry; the store supplies the offset it minted. */
export const decodeRecord = (raw: string, offset: number): LogRecord => {
  const entry = JSON.parse(raw) as LogEntry;
  return { ...entry, offset };
};
