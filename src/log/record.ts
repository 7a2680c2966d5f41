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

/**
 * The capsule runtime's release line, as its agent card tells it (docs/release-lines.md): 'spec' is the spec's line (the 0.3 wire plus two 0.4-era additions); '0.2' stands for
 * 0.1 and 0.2; from '0.4' on, a capsule is resumed exactly by id within a session; '1.0' is the A2A 1.0 door.
 */
export type ReleaseLine = '0.2' | 'spec' | '0.4' | '0.5' | '0.6' | '1.0';

/** Why frames may be missing at this point of the log. */
export type MissingReason =
  | 'cold-attach' // first contact: frames written before the capsule's replay buffer are unknown
  | 'gap' // the capsule answered the replay with a `gap` frame
  | 'no-overlap' // the replay shares nothing with the stored tail: more than a buffer was missed
  | 'lagged' // the capsule dropped frames from a lagging connection and its buffer no longer holds them
  | 'capsule-restarted' // a new capsule session: the old session's unsent frames are gone
  | 'id-zero-unreplayable' // the replay skipped id-0 frames (each task's first status), by spec
  | 'store-unavailable' // the store was down longer than the writer's queue could hold
  | 'store-reset'; // the store lost records (older snapshot, lagging replica, data loss): a new epoch starts here

/** A skill a capsule's agent card lists, as kept (bounded by the upstream room). */
export interface CardSkill {
  id: string;
  name: string;
  description: string;
  tags: string[];
}

/** What is kept of a capsule's agent card: name and version, description and skills when it has them. */
export interface CardSummary {
  name: string | null;
  version: string | null;
  description?: string;
  skills?: CardSkill[];
}

export type FactEntry =
  | {
      kind: 'fact';
      fact: 'upstream-connected';
      /** The `connection-ack` data line, byte for byte. */
      ack: string;
      /** Which (re)connection of this gateway process this is, from 1. */
      attempt: number;
      /** The release line the connection was read with (absent: the spec's line). */
      release?: ReleaseLine;
      /** The capsule session (`ses_…`) the connection watches, when its card says. */
      sessionId?: string;
      /** The agent card's name and version, when it has them. */
      card?: CardSummary;
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
    }
  /*
   * The submission queue (src/core/submission-queue.ts): a queued submission is handed to the
   * capsule by the capsule's owner, which records the hand-off (fenced) before it sends. The capsule
   * may refuse it for now (busy, its own queue full): it goes back to its place in the queue. A
   * withdrawn one never runs (aborted, or failed with the reason), or, handed already, is canceled.
   */
  | { kind: 'fact'; fact: 'submission-handed'; messageId: string; contextId: string; receivedAt: number }
  | { kind: 'fact'; fact: 'submission-returned'; messageId: string; reason: string; receivedAt: number }
  /** The capsule took a handed submission as this task: a reader whose log lost the task's first frame still links it. */
  | {
      kind: 'fact';
      fact: 'submission-started';
      messageId: string;
      contextId: string;
      taskId: string;
      /** The hand-off span's `traceparent`, when traced: each replica's delivery of the task joins it. */
      trace?: string;
      receivedAt: number;
    }
  | {
      kind: 'fact';
      fact: 'submission-withdrawn';
      messageId: string;
      contextId: string;
      outcome: 'aborted' | 'failed';
      reason: string;
      receivedAt: number;
    };

export type SurfaceName = 'murmur' | 'beeos' | 'flue' | 'ai-sdk' | 'a2a';

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
  /** Waits in the capsule's submission queue until its owner hands it over (absent: sent at once). */
  queued?: true;
  /**
   * The W3C `traceparent` of its admission span, when the gateway exports traces: the replica that
   * hands it to the capsule continues the client's trace from here.
   */
  trace?: string;
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

/** What starts a frame in the compact encoding (below): `f` and a tab. JSON always starts with `{`. */
const COMPACT_FRAME = 'f\t';

/**
 * A frame's fields travel as they are when that round-trips: no tab in the event or the id (the
 * fields are tab-separated; the data, last, may hold anything), an integer receive time, and a data
 * line (and event and id) that is well-formed UTF-16 (Redis keeps UTF-8: a lone surrogate would not
 * survive).
 */
const wellFormed = (s: string): boolean => (s as string & { isWellFormed(): boolean }).isWellFormed();
const compactable = (f: FrameEntry): boolean =>
  f.event.indexOf('\t') < 0 &&
  wellFormed(f.event) &&
  (f.upstreamId === null || (f.upstreamId.indexOf('\t') < 0 && wellFormed(f.upstreamId))) &&
  Number.isSafeInteger(f.receivedAt) &&
  wellFormed(f.data);

/**
 * Serialise an entry for a store that keeps strings (Redis). The offset is not part of it. A frame
 * (nearly every record) is `f<TAB>event<TAB>[=id]<TAB>receivedAt<TAB>data`: its data line is the
 * capsule's JSON, which JSON.stringify escaped again (0.8-0.9 us a frame against 0.05, and a
 * JSON.parse of 0.6 us on every read back). Anything else, and a frame that would not round-trip,
 * is JSON. `=` marks an id, so a null id (nothing) and an empty one (`=`) stay apart.
 */
export const encodeEntry = (entry: LogEntry): string =>
  entry.kind === 'frame' && compactable(entry)
    ? `${COMPACT_FRAME}${entry.event}\t${entry.upstreamId === null ? '' : `=${entry.upstreamId}`}\t${entry.receivedAt}\t${entry.data}`
    : JSON.stringify(entry);

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

/** Inverse of encodeEntry (either form: logs written before the compact one read as they were). */
export const decodeRecord = (raw: string, offset: number): LogRecord => {
  if (raw.startsWith(COMPACT_FRAME)) {
    const endEvent = raw.indexOf('\t', COMPACT_FRAME.length);
    const endId = raw.indexOf('\t', endEvent + 1);
    const endAt = raw.indexOf('\t', endId + 1);
    // The same literal (fields and their order) as frameRecord: one hidden class for every frame.
    return {
      kind: 'frame',
      event: raw.slice(COMPACT_FRAME.length, endEvent),
      upstreamId: endId === endEvent + 1 ? null : raw.slice(endEvent + 2, endId),
      data: raw.slice(endAt + 1),
      receivedAt: Number(raw.slice(endId + 1, endAt)),
      offset,
    };
  }
  const entry = JSON.parse(raw) as LogEntry;
  return { ...entry, offset };
};
