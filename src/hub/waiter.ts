/**
 * One long-poll wait: answer from the store at once when records exist after the cursor, else park on
 * the capsule's channel until its next batch, the timeout or the caller's abort. Never polls the store.
 */
import type { LogRecord } from '../log/record.js';
import type { LogPosition, LogStore, ReadResult } from '../log/store.js';
import type { WaitResult } from '../core/types.js';
import { GatewayError } from '../errors.js';
import type { CapsuleChannel, ChannelListener } from './capsule-channel.js';

export interface WaitRequest {
  after: number;
  limit: number;
  timeoutMs: number;
  signal?: AbortSignal;
}

const storeUnavailable = (err: unknown): GatewayError =>
  err instanceof GatewayError
    ? err
    : new GatewayError('store_unavailable', 'the log store did not answer', { cause: String(err) });

/** Park one waiter on `channel`; it joins before its first read so no batch can slip past it. */
export const waitOnChannel = (
  channel: CapsuleChannel,
  store: LogStore,
  request: WaitRequest,
): Promise<WaitResult> =>
  new Promise<WaitResult>((resolve, reject) => {
    const { after, limit, timeoutMs, signal } = request;
    let done = false;
    let timer: NodeJS.Timeout | null = null;
    let known: LogPosition | null = channel.position;

    const cleanup = (): void => {
      done = true;
      if (timer) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      channel.leave(listener);
    };
    const finish = (records: LogRecord[], timedOut: boolean, position: LogPosition | null): void => {
      if (done) return;
      cleanup();
      const at = position ?? known ?? channel.position;
      if (at) {
        resolve({ records, timedOut, position: at });
        return;
      }
      // Aborted before anything was read: the waiter is gone already, one position read answers.
      store.position(channel.capsule).then(
        (now) => resolve({ records, timedOut, position: now }),
        (err: unknown) => reject(storeUnavailable(err)),
      );
    };
    const fail = (err: unknown): void => {
      if (done) return;
      cleanup();
      reject(storeUnavailable(err));
    };
    /** A store read after `after`; answers the waiter when it returns records. */
    const readNow = (generation: number): void => {
      // Near the head the channel answers from memory (an empty answer there parks this waiter);
      // otherwise one store read, shared with any waiter asking for the same page.
      channel.read(after, limit, true).then((page: ReadResult) => {
        if (done) return;
        known = page.position;
        if (!channel.observe(page.position, generation)) {
          // Another epoch (the channel reset and resolved us) or a stale read: answer empty.
          finish([], false, page.position);
          return;
        }
        if (page.records.length > 0) finish(page.records, false, page.position);
        else if (timer === null) armTimer();
      }, fail);
    };
    const armTimer = (): void => {
      if (timeoutMs <= 0) {
        finish([], true, null);
        return;
      }
      timer = setTimeout(() => finish([], true, null), timeoutMs);
    };
    const onAbort = (): void => finish([], false, null);

    const listener: ChannelListener = {
      kind: 'waiter',
      push(records, position) {
        if (done) return;
        known = position;
        const first = records[0];
        if (!first) return;
        if (first.offset === after + 1) {
          finish(records.slice(0, limit), false, position);
          return;
        }
        const fresh = records.filter((r) => r.offset > after);
        const head = fresh[0];
        if (!head) return;
        if (head.offset === after + 1) finish(fresh.slice(0, limit), false, position);
        // A hole before this batch (the tail started after our cursor): the store has it.
        else readNow(channel.generation);
      },
      reset(position) {
        finish([], false, position);
      },
      shutdown() {
        finish([], false, null);
      },
      unreachable() {
        // Never an empty 200 ("nothing new") from a replica that cannot see what is new.
        fail(new GatewayError('store_unavailable', 'this replica cannot reach the log store'));
      },
    };

    // Join even when already aborted: leaving then schedules the channel's dissolve like any waiter.
    channel.join(listener);
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    channel.ready.then(() => {
      if (!done) readNow(channel.generation);
    }, fail);
  });
