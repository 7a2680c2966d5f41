/**
 * The capsule's frames as the LOG holds them, for the upstream room's submit: whichever replica
 * ingests the capsule, every replica reads the same log, so a submission made on a replica that does
 * not ingest the capsule still sees its task's first frame (a queued task starts after its
 * `message/stream` closed, and only the watch shows it). The room receives a plain frame source and
 * knows nothing of the hub; records are turned back into the frames they were.
 */
import type { LogRecord } from '../log/record.js';
import type { HubPort } from './types.js';
import type { SubscriptionEnd } from './types.js';

/** One upstream frame, as the capsule wrote it (the shape `src/upstream` reads). */
export interface LoggedFrame {
  event: string;
  upstreamId: string | null;
  data: string;
}

export type LogFrameSource = (after: number, listener: (frame: LoggedFrame) => void) => () => void;

/** Ends after which the subscription is taken up again from the last record seen. */
const RESUMABLE: ReadonlySet<SubscriptionEnd> = new Set(['slow', 'store_error', 'store_unreachable']);
const RESUME_DELAY_MS = 200;

/**
 * Frames of `capsule` logged after offset `after`, live, until the returned function is called.
 * One hub subscription per waiting submission: the hub shares one store reader per capsule.
 */
export const logFrameSource =
  (hub: Pick<HubPort, 'subscribe'>, capsule: string): LogFrameSource =>
  (after, listener) => {
    const abort = new AbortController();
    let cursor = after;
    let timer: NodeJS.Timeout | undefined;
    const onRecords = (records: readonly LogRecord[]): void => {
      for (const record of records) {
        cursor = record.offset;
        if (abort.signal.aborted) return;
        if (record.kind === 'frame')
          listener({ event: record.event, upstreamId: record.upstreamId, data: record.data });
      }
    };
    const open = (): void => {
      if (abort.signal.aborted) return;
      hub.subscribe(capsule, {
        after: cursor,
        onRecords,
        signal: abort.signal,
        onEnd: (reason) => {
          // A slow or failing reader resumes where it was: a submission keeps waiting for its task.
          if (RESUMABLE.has(reason) && !abort.signal.aborted) timer = setTimeout(open, RESUME_DELAY_MS);
        },
      });
    };
    open();
    return () => {
      clearTimeout(timer);
      abort.abort();
    };
  };
