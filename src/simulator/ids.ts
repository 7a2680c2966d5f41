/**
 * The capsule's id counters and id minting (spec "Event ids"). Ids are u64 labels, kept as BigInt;
 * which counter numbers which frame is decided by the task runner, not here.
 */
import { randomBytes } from 'node:crypto';

/** The task's counter: from 0 for every task and every reopened attempt. */
export const TASK_COUNTER_START = 0n;
/** The chunk counter: 2^62 - 1 at launch (once per session). */
export const CHUNK_COUNTER_START = 4611686018427387903n;
/** The input-wait counter: 2^63 - 1, again for every `request-input` call. */
export const INPUT_WAIT_COUNTER_START = 9223372036854775807n;
/** The queued-cancel counter: 2^61 - 1 at launch (once per session). */
export const QUEUED_CANCEL_COUNTER_START = 2305843009213693951n;
/** The id every `rejected` status carries. */
export const REJECTED_ID = 0n;
const U64_MAX = (1n << 64n) - 1n;

/** A u64 counter that hands out its current value and advances by one. */
export class Counter {
  constructor(public value: bigint) {}

  /** Return the current value, then advance (wrapping like a release-build u64). */
  next(): bigint {
    const v = this.value;
    this.value = (v + 1n) & U64_MAX;
    return v;
  }
}

/**
 * Parse `Last-Event-ID` as the capsule does (a Rust `u64` parse): digits with an optional `+`,
 * within u64. Anything else is "not a number" (null).
 */
export const parseLastEventId = (value: string | undefined): bigint | null => {
  if (value === undefined) return null;
  if (!/^\+?[0-9]+$/.test(value)) return null;
  const n = BigInt(value.startsWith('+') ? value.slice(1) : value);
  return n > U64_MAX ? null : n;
};

/** 32 hex digits laid out like a UUIDv7: 48-bit ms timestamp, version 7, variant bits, random. */
const uuidV7Hex = (): string => {
  const ts = Date.now().toString(16).padStart(12, '0').slice(-12);
  const rand = randomBytes(10).toString('hex');
  const variant = ((parseInt(rand[3] ?? '0', 16) & 0x3) | 0x8).toString(16);
  return `${ts}7${rand.slice(0, 3)}${variant}${rand.slice(4, 19)}`;
};

/** `tsk_` + a UUIDv7 in 32 hex digits (spec "What message/stream writes"). */
export const mintTaskId = (): string => `tsk_${uuidV7Hex()}`;
/** `ctx_` + a UUIDv7, used when the message carries no `contextId`. */
export const mintContextId = (): string => `ctx_${uuidV7Hex()}`;
