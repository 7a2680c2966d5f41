/**
 * The ingestor's contract: the writer and store it needs, as narrow interfaces (only what ingestion
 * calls, so upstream code does not depend on the log's internals), its knobs, and the state it
 * reports to /capsules.
 */
import type { Logger } from 'pino';
import type { UpstreamConnection, UpstreamStateName } from '../core/types.js';
import type { LogEntry, LogRecord } from '../log/record.js';
import type { SseFrame } from './sse-frames.js';

/** The writer as ingestion uses it (LogWriter fits). */
export interface FrameSink {
  append(capsule: string, entry: LogEntry): Promise<unknown>;
  /** Queue without a promise; false when the entry was not queued and will never reach the log. */
  write?(capsule: string, entry: LogEntry): boolean | void;
  /** The store lost records and began a new epoch; queued frames of that capsule were discarded. */
  onReset?(listener: (capsule: string) => void): () => void;
  /** Resolves once the capsule's queue has room again after refusals. */
  whenRoom?(capsule: string): Promise<void>;
}

/** The store read that continues the session the log holds (at start, and after a store reset). */
export interface TailSource {
  readLast(capsule: string, count: number): Promise<LogRecord[]>;
}

export interface IngestorOptions {
  capsule: string;
  url: string;
  doorToken?: string | null;
  writer: FrameSink;
  store: TailSource;
  logger?: Logger;
  /** The capsule's replay buffer size (spec: 512). */
  bufferSize?: number;
  /**
   * Capsules known to have written nothing before this gateway first watches them (the demo's, whose
   * workload starts once they are watched): their empty first replay is not a `cold-attach`.
   */
  freshCapsules?: ReadonlySet<string>;
  /** Backoff for attempts that fail to connect (and for store reads that fail). */
  backoffBaseMs?: number;
  backoffCapMs?: number;
  /** Jitter before reconnecting after an acknowledged connection ended. */
  reconnectJitterMs?: number;
  /** Connection attempts allowed per second (a flapping capsule cannot spin the loop). */
  maxConnectsPerSecond?: number;
  /** Labelling hints only (restarted vs no-overlap); never what decides duplicate vs new. */
  replayQuietMs?: number;
  replayMaxMs?: number;
  /**
   * Spec line: how long after the ack frames may wait for the replay's end to be proven when only
   * that proves the replay continues the log (replay-alignment.ts); past it a fact says frames may
   * be missing and they are appended (ms, default 2000).
   */
  replayProofMs?: number;
  connectTimeoutMs?: number;
  /** TCP keep-alive idle time on the watch socket (ms; then 10 probes 1 s apart). */
  keepAliveMs?: number;
  /** The capsule's heartbeat interval until one is seen (ms; the spec's 15 s). */
  heartbeatMs?: number;
  /** 0.4+ lines: heartbeat intervals without a byte before the watch counts as lost. */
  heartbeatMisses?: number;
  /** Bound on reading the agent card before each connection (ms). */
  cardTimeoutMs?: number;
  /** Observe each frame appended (capsule-client uses it to find a task whose stream closed early). */
  onFrame?: (frame: SseFrame) => void;
  /** Observe state changes (tests and metrics; pino gets one line per change regardless). */
  onState?: (state: IngestorState) => void;
}

export interface IngestorState {
  state: UpstreamStateName;
  /** Why: 'start', 'reconnect', 'connection-ack', 'store unavailable', 'log queue full', a socket error… */
  reason: string | null;
  lastFrameAt: number | null;
  reconnects: number;
  ack: string | null;
  /** The line, session and card the current (or last) connection was read with. */
  connection?: UpstreamConnection | null;
}
