/**
 * Test helper: compare a capsule's log with the simulator's own record of every frame it wrote, and
 * explain each difference. A written frame may be absent from the log only where a
 * `frames-possibly-missing` fact sits between the log frames around it; a log frame the capsule did
 * not write there (a duplicate) is always a problem.
 */
import type { LogRecord } from '../../src/log/record.js';
import type { LogStore } from '../../src/log/store.js';
import type { WrittenFrame } from '../../src/simulator/index.js';

export interface Comparison {
  /** Written frames found in the log, in order. */
  matched: number;
  /** Written frames absent from the log but covered by a fact. */
  covered: { frame: WrittenFrame; by: string[] }[];
  /** Explanations of every violation; empty when the log is right. */
  problems: string[];
}

const short = (f: { event: string; id?: string | null; upstreamId?: string | null; data: string }): string =>
  `${f.event} id=${f.id ?? f.upstreamId ?? '∅'} ${f.data.slice(0, 90)}`;

/**
 * The record that closes a task: its final `status` frame. (A `text` chunk also carries
 * `"final":true`, one frame earlier: waiting for that one races the status frame after it.)
 */
export const isFinalStatusOf = (r: LogRecord, taskId: string): boolean =>
  r.kind === 'frame' && r.event === 'status' && r.data.includes(taskId) && r.data.includes('"final":true');

/** Every record of a capsule's log, paging through the store. */
export const readAll = async (store: LogStore, capsule: string): Promise<LogRecord[]> => {
  const out: LogRecord[] = [];
  for (let after = 0, pages = 0; pages < 10_000; pages++) {
    const { records } = await store.read(capsule, after, 1000);
    if (records.length === 0) break;
    out.push(...records);
    after = records[records.length - 1]!.offset;
  }
  return out;
};

/** How many log frames from `j` continue the written frames from `k` (skipping unlogged id-0 frames). */
const runLength = (
  frames: readonly LogRecord[],
  j: number,
  written: readonly WrittenFrame[],
  k: number,
  same: (l: LogRecord, w: WrittenFrame) => boolean,
): number => {
  let run = 0;
  for (; j < frames.length && k < written.length && run < 64; k++) {
    if (same(frames[j]!, written[k]!)) {
      run++;
      j++;
    } else if (written[k]!.id !== '0') break;
  }
  return run;
};

/**
 * Walk written and logged frames together. Frames are matched on event, id and data (byte for byte);
 * a written frame with no match at this point is "missing" and must be covered by a fact recorded
 * after the last matched log frame and before the next log frame. A missing id-0 frame may be covered
 * by any reason; any other missing frame by a reason other than `id-zero-unreplayable`.
 */
export const compareLog = (records: readonly LogRecord[], written: readonly WrittenFrame[]): Comparison => {
  const result: Comparison = { matched: 0, covered: [], problems: [] };
  const frames = records.filter((r) => r.kind === 'frame');
  // Facts between consecutive log frames: factsBefore[j] = facts after frames[j-1] and before frames[j].
  const factsBefore: string[][] = [[]];
  for (const r of records) {
    if (r.kind === 'frame') factsBefore.push([]);
    else if (r.kind === 'fact' && r.fact === 'frames-possibly-missing') {
      factsBefore[factsBefore.length - 1]!.push(`${r.reason}@${r.offset}`);
    }
  }
  const same = (l: LogRecord, w: WrittenFrame): boolean =>
    l.kind === 'frame' && l.event === w.event && l.upstreamId === w.id && l.data === w.data;

  let i = 0;
  for (let j = 0; j <= frames.length; j++) {
    const l = frames[j];
    const facts = factsBefore[j] ?? [];
    // Written frames before the next log frame's match are missing here.
    let k = i;
    if (l) {
      while (k < written.length && !same(l, written[k]!)) k++;
      // Where a fact allows a loss, a byte-identical repeat (a reopened attempt) may be what was
      // kept: match the log frame where the most following log frames continue the written ones.
      if (facts.length > 0 && k < written.length) {
        let best = runLength(frames, j, written, k, same);
        for (let alt = k + 1; alt < written.length && alt < k + 2048; alt++) {
          if (!same(l, written[alt]!)) continue;
          const run = runLength(frames, j, written, alt, same);
          if (run > best) [best, k] = [run, alt];
        }
      }
      if (k === written.length) {
        result.problems.push(
          `log offset ${l.offset} (${short(l as never)}) is not a written frame at or after written #${i}: duplicate or foreign`,
        );
        continue;
      }
    } else {
      k = written.length;
    }
    for (; i < k; i++) {
      const w = written[i]!;
      const ok = w.id === '0' ? facts : facts.filter((f) => !f.startsWith('id-zero-unreplayable'));
      if (ok.length > 0) result.covered.push({ frame: w, by: ok });
      else {
        const where = l ? `before log offset ${l.offset}` : 'at the end of the log';
        result.problems.push(
          `written #${i} (session ${w.session}, ${short(w)}) missing ${where}, no fact covers it`,
        );
      }
    }
    if (l) {
      result.matched++;
      i++;
    }
  }
  return result;
};
