/**
 * What every soak checks once its faults are over, in one place (the suite's short soak and the
 * long `npm run soak`): the log against the simulator's record of what it wrote (log-vs-written.ts),
 * offsets strictly increasing, and the native SSE and long-poll readers exact against the log.
 */
import { scaled } from '../support/deadlines.js';
import type { LogRecord } from '../../src/log/record.js';
import type { LogStore } from '../../src/log/store.js';
import type { WrittenFrame } from '../../src/simulator/index.js';
import { projectRecord } from '../../adapters/murmur/projection.js';
import { openRaw } from '../adapters/murmur/raw-client.js';
import { compareLog, isFinalStatusOf, readAll } from '../upstream/log-vs-written.js';

export interface LogCheck {
  records: LogRecord[];
  written: number;
  matched: number;
  /** Missing written frames covered by a fact, by the fact's reason, and id-0 apart. */
  missingByKind: Record<string, number>;
  problems: string[];
}

const recordLine = (r: LogRecord): string =>
  `${r.offset} ${new Date(r.receivedAt).toISOString().slice(11, 23)} ${r.kind} ${r.kind === 'frame' ? `${r.event} ${r.upstreamId} ${r.data.slice(0, 70)}` : JSON.stringify(r).slice(0, 160)}`;

/** The log around every loss fact other than id-0 (what was stored before and after it). */
export const aroundLosses = (records: readonly LogRecord[]): string =>
  records
    .flatMap((r, i) =>
      r.kind === 'fact' && r.fact === 'frames-possibly-missing' && r.reason !== 'id-zero-unreplayable'
        ? records.slice(Math.max(0, i - 3), i + 4)
        : [],
    )
    .map(recordLine)
    .join('\n');

/** The log records around `offset` (what a problem names), one line each. */
export const aroundOffset = (
  records: readonly LogRecord[],
  offset: number,
  before = 12,
  after = 4,
): string => {
  const i = records.findIndex((r) => r.offset >= offset);
  const at = i < 0 ? records.length : i;
  return records
    .slice(Math.max(0, at - before), at + after)
    .map((r) => `    | ${recordLine(r)}`)
    .join('\n');
};

/** Resolve once the log holds `taskId`'s final status (bounded by `timeoutMs`); false if it never did. */
export const waitForFinal = async (
  store: LogStore,
  capsule: string,
  taskId: string,
  timeoutMs = 30_000,
): Promise<boolean> => {
  const deadline = Date.now() + scaled(timeoutMs);
  for (let after = 0; Date.now() < deadline;) {
    const { records } = await store
      .waitAfter(capsule, after, 1000, 1000)
      .catch(() => ({ records: [] as LogRecord[] }));
    if (records.some((r) => isFinalStatusOf(r, taskId))) return true;
    if (records.length > 0) after = records[records.length - 1]!.offset;
  }
  return false;
};

/**
 * The whole log of `capsule` against `written`: no duplicate, no frame missing without a fact
 * between its neighbours (compareLog), a missing frame other than an id-0 one only under a fact
 * that says more than "id 0 is never replayed", and offsets strictly increasing.
 */
export const checkLog = async (
  store: LogStore,
  capsule: string,
  written: readonly WrittenFrame[],
): Promise<LogCheck> => {
  const records = await readAll(store, capsule);
  const result = compareLog(records, written);
  const missingByKind: Record<string, number> = {};
  for (const c of result.covered) {
    const kind = `${c.frame.id === '0' ? 'id-0' : 'other'} under ${c.by.map((b) => b.split('@')[0]).join('+')}`;
    missingByKind[kind] = (missingByKind[kind] ?? 0) + 1;
  }
  const problems = [...result.problems];
  for (let i = 1; i < records.length; i++) {
    if (records[i]!.offset <= records[i - 1]!.offset)
      problems.push(`offset ${records[i]!.offset} follows ${records[i - 1]!.offset}`);
  }
  return { records, written: written.length, matched: result.matched, missingByKind, problems };
};

/** What the native surface must write for the log: each record's projection, in order. */
const expectedNative = (records: readonly LogRecord[]): string[] =>
  records.flatMap((r) => {
    const e = projectRecord(r);
    if (e === null || e.kind === 'capsule-closed') return [];
    if (e.kind === 'gap') return [`gap ${e.firstAvailableId}`];
    return [`${e.event} ${e.id ?? '∅'} ${e.data}`];
  });

/**
 * A native `GET /murmur/{capsule}/events` reader from the start, and a long-poll reader paging
 * `/poll`, each read up to the log's last record: both must show exactly the log.
 */
export const checkReaders = async (
  gatewayUrl: string,
  capsule: string,
  records: readonly LogRecord[],
): Promise<string[]> => {
  const problems: string[] = [];
  const last = records[records.length - 1];
  if (!last) return ['the log is empty'];
  const want = expectedNative(records);
  const lastId = String(
    [...records].reverse().find((r) => r.kind === 'frame' && r.upstreamId !== null)?.offset,
  );

  const sse = await openRaw(`${gatewayUrl}/murmur/${encodeURIComponent(capsule)}/events?last_event_id=0`);
  try {
    await sse.waitFor((s) => s.frames().some((f) => f.id === lastId), `native SSE up to ${lastId}`, 60_000);
    const got = sse
      .frames()
      .filter((f) => f.event !== 'connection-ack')
      .map((f) => {
        if (f.event === 'gap')
          return `gap ${(JSON.parse(f.data) as { first_available_id: number }).first_available_id}`;
        return `${f.event ?? 'message'} ${f.id ?? '∅'} ${f.data}`;
      });
    const upTo = got.findIndex((g) => g.split(' ')[1] === lastId && !g.startsWith('gap '));
    const seen = got.slice(0, upTo + 1);
    const firstDiff = want.findIndex((w, i) => seen[i] !== w);
    if (seen.length !== want.slice(0, seen.length).length || (firstDiff >= 0 && firstDiff < seen.length))
      problems.push(
        `native SSE differs from the log at event #${firstDiff}: ${seen[firstDiff]?.slice(0, 90)} vs ${want[firstDiff]?.slice(0, 90)}`,
      );
    // Events after the last id-bearing frame (a trailing fact) may be written after it: compare the prefix only.
    const wantUpTo = want.findIndex((w) => w.split(' ')[1] === lastId && !w.startsWith('gap '));
    if (seen.length !== wantUpTo + 1)
      problems.push(`native SSE wrote ${seen.length} events up to ${lastId}, the log ${wantUpTo + 1}`);
  } finally {
    sse.close();
  }

  let after = 0;
  const polled: { offset: number; kind: string; event?: string; id?: string | null; data?: string }[] = [];
  for (let pages = 0; pages < 10_000 && after < last.offset; pages++) {
    const res = await fetch(
      `${gatewayUrl}/murmur/${encodeURIComponent(capsule)}/poll?after=${after}&wait=1&limit=500`,
    );
    const body = (await res.json()) as { records: typeof polled; next_cursor: number };
    polled.push(...body.records);
    after = body.next_cursor;
  }
  const wantPoll = records.map((r) =>
    r.kind === 'frame' ? `${r.offset} frame ${r.event} ${r.upstreamId} ${r.data}` : `${r.offset} ${r.kind}`,
  );
  const gotPoll = polled.map((r) =>
    r.kind === 'frame' ? `${r.offset} frame ${r.event} ${r.id} ${r.data}` : `${r.offset} ${r.kind}`,
  );
  const pollDiff = wantPoll.findIndex((w, i) => gotPoll[i] !== w);
  if (pollDiff >= 0 || gotPoll.length !== wantPoll.length)
    problems.push(
      `long-poll differs from the log at record #${pollDiff}: ${gotPoll[pollDiff]?.slice(0, 90)} vs ${wantPoll[pollDiff]?.slice(0, 90)} (${gotPoll.length} vs ${wantPoll.length})`,
    );
  return problems;
};

/**
 * The first record of `capsule` after `after` that matches `pred`, once logged: bounded at 30 s, a
 * store error (Redis paused or restarting mid-fault) only retried. A miss throws with `said()`, what
 * the gateway processes said last, so a run that stalls explains itself.
 */
export const firstLogged = async (
  store: LogStore,
  capsule: string,
  pred: (r: LogRecord) => boolean,
  after: number,
  said: () => string,
): Promise<LogRecord> => {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const { records } = await store
      .waitAfter(capsule, after, 1000, 1000)
      .catch(() => ({ records: [] as LogRecord[] }));
    const hit = records.find(pred);
    if (hit) return hit;
    if (records.length > 0) after = records[records.length - 1]!.offset;
  }
  throw new Error(`expected record not logged within 30 s; gateway said:\n${said()}`);
};
