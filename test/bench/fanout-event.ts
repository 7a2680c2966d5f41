/**
 * What the fan-out bench publishes and how clients read it back: every event's text carries
 * `@<seq>@<publish time ms>@`, padded so the SSE `data:` line is ~200 bytes on both sides (the
 * gateway's `text` frame JSON and the body POSTed to nchan). Latencies go into a log-bucketed
 * histogram (1 % wide buckets) so every delivered event is measured without shipping arrays over IPC.
 */
import { performance } from 'node:perf_hooks';

/** Wall-clock ms with sub-ms resolution, comparable across the bench's processes. */
export const nowMs = (): number => performance.timeOrigin + performance.now();

export const DATA_BYTES = 200;

/** The text of event `seq`, padded so `{"id":"<taskId>","text":"…","final":false}` is DATA_BYTES long. */
export const eventText = (seq: number, taskId: string): string => {
  const head = `@${seq}@${nowMs().toFixed(3)}@`;
  const frame = `{"id":"${taskId}","text":"","final":false}`.length;
  return head + '.'.repeat(Math.max(0, DATA_BYTES - frame - head.length));
};

/** The same payload nchan gets as the POST body (what the gateway's capsule would write). */
export const eventData = (seq: number, taskId: string): string =>
  `{"id":"${taskId}","text":"${eventText(seq, taskId)}","final":false}`;

/** The follow bench's stream `i`: capsule id and nchan channel (`f0`…), key `murmur:f0`…. */
export const streamName = (i: number): string => `f${i}`;

/**
 * What nchan's multiplexed subscribers get for event `seq` of stream `key`: `GET /v1/follow`'s
 * envelope around the record `/murmur/{c}/poll` would give (fanout-follow.ts), so both sides carry
 * about the same bytes per event and the keyed clients read the stream from the data line's start.
 */
export const keyedEventData = (seq: number, key: string): string =>
  JSON.stringify({
    stream: key,
    cursor: String(seq),
    event: 'record',
    data: {
      offset: seq,
      kind: 'frame',
      event: 'text',
      id: String(seq),
      data: eventData(seq, 'tsk_bench'),
      received_at: new Date().toISOString(),
    },
  });

const BASE_MS = 0.01;
const STEP = Math.log(1.01);
export const BUCKETS = 1400; // up to ~0.01 ms × 1.01^1400 ≈ 11 min

export const bucketOf = (ms: number): number =>
  Math.min(BUCKETS - 1, Math.max(0, Math.floor(Math.log(Math.max(ms, BASE_MS) / BASE_MS) / STEP)));

/** The upper edge of a bucket, in ms. */
const bucketMs = (i: number): number => BASE_MS * Math.exp((i + 1) * STEP);

export const percentile = (hist: ArrayLike<number>, p: number): number => {
  let total = 0;
  for (let i = 0; i < hist.length; i++) total += hist[i]!;
  if (total === 0) return NaN;
  const want = Math.ceil((p / 100) * total);
  let seen = 0;
  for (let i = 0; i < hist.length; i++) {
    seen += hist[i]!;
    if (seen >= want) return bucketMs(i);
  }
  return bucketMs(hist.length - 1);
};
