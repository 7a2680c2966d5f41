/**
 * The reads bench's log (scale-reads.ts): one real turn per surface is made through the gateway
 * (a Flue conversation by the SDK, a BeeOS conversation message, each answered by the simulated
 * capsule), read back from Redis as the template, then cloned into N conversations × T turns written
 * straight through LogWriter → RedisStore, so setup is seconds while every record keeps the shape
 * the surfaces really write and the capsule really sends. A clone gets fresh ids of the same shape
 * (every run of hex digits redrawn, so `conv_<uuid>` and `tsk_<hex>` stay valid), per conversation
 * for context/channel/uid and per turn for message, submission and task ids.
 */
import { randomBytes } from 'node:crypto';
import { LogWriter } from '../../src/log/log-writer.js';
import type { LogEntry, LogRecord } from '../../src/log/record.js';
import { RedisStore } from '../../src/log/redis-store.js';

/** The records of one surface's conversation: `open` once per conversation, `turn` once per turn. */
export interface Template {
  open: LogEntry[];
  turn: LogEntry[];
  /** Ids redrawn per conversation and per turn. */
  convIds: string[];
  turnIds: string[];
}

const strip = (r: LogRecord): LogEntry => {
  const { offset: _offset, ...entry } = r;
  return entry as LogEntry;
};

/** Task ids of the frames that name `contextId` (a task's status frames carry it). */
const taskIdsOf = (records: LogRecord[], contextId: string): string[] => {
  const ids = new Set<string>();
  for (const r of records) {
    if (r.kind !== 'frame' || !r.data.includes(`"context_id":"${contextId}"`)) continue;
    const id = (JSON.parse(r.data) as { id?: string }).id;
    if (id) ids.add(id);
  }
  return [...ids];
};

const framesOf = (records: LogRecord[], taskIds: string[]): LogRecord[] =>
  records.filter((r) => r.kind === 'frame' && taskIds.some((t) => r.data.includes(`"${t}"`)));

export const flueTemplate = (records: LogRecord[], contextId: string): Template => {
  const subs = records.filter((r) => r.kind === 'submission' && r.contextId === contextId);
  const tasks = taskIdsOf(records, contextId);
  const turn = [...subs, ...framesOf(records, tasks)].sort((a, b) => a.offset - b.offset);
  const meta = (subs[0]?.kind === 'submission' ? subs[0].meta : undefined) ?? {};
  const turnIds = [...tasks];
  for (const s of subs) if (s.kind === 'submission') turnIds.push(s.messageId);
  for (const k of ['submissionId', 'idempotencyKey'])
    if (typeof meta[k] === 'string') turnIds.push(meta[k] as string);
  const convIds = [contextId, ...(typeof meta.uid === 'string' ? [meta.uid] : [])];
  return { open: [], turn: turn.map(strip), convIds, turnIds };
};

export const beeosTemplate = (records: LogRecord[], channelId: string): Template => {
  const open = records.find(
    (r) => r.kind === 'submission' && JSON.stringify(r.meta ?? {}).includes(`"channelId":"${channelId}"`),
  );
  if (!open || open.kind !== 'submission') throw new Error(`no record opens ${channelId}`);
  const subs = records.filter(
    (r) => r.kind === 'submission' && r.contextId === open.contextId && r.offset !== open.offset,
  );
  const tasks = new Set(taskIdsOf(records, open.contextId));
  for (const s of subs) {
    const taskId = (s.kind === 'submission' ? (s.meta?.beeos as { taskId?: string } | undefined) : undefined)
      ?.taskId;
    if (taskId) tasks.add(taskId);
  }
  const turn = [...subs, ...framesOf(records, [...tasks])].sort((a, b) => a.offset - b.offset);
  const turnIds = [...tasks, ...subs.map((s) => (s.kind === 'submission' ? s.messageId : ''))];
  return {
    open: [strip(open)],
    turn: turn.map(strip),
    convIds: [open.contextId, channelId, open.messageId],
    turnIds,
  };
};

/** The same id with every run of ≥ 8 hex digits redrawn; ids without one get a suffix. */
const reshape = (id: string, salt: string): string => {
  const out = id.replace(/[0-9a-f]{8,}/g, (hex) =>
    randomBytes(Math.ceil(hex.length / 2))
      .toString('hex')
      .slice(0, hex.length),
  );
  return out === id ? `${id}-${salt}` : out;
};

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const cloneAll = (entries: LogEntry[], ids: Map<string, string>): LogEntry[] => {
  if (ids.size === 0) return entries;
  const re = new RegExp([...ids.keys()].map(escape).join('|'), 'g');
  return entries.map((e) => JSON.parse(JSON.stringify(e).replace(re, (m) => ids.get(m)!)) as LogEntry);
};

export interface Conversation {
  surface: 'flue' | 'beeos';
  /** Its id on the surface: the Flue conversation id or the BeeOS conversation id. */
  id: string;
}

/**
 * Write `conversations` × `turns` into `capsule`'s log, surfaces alternating (even: Flue, odd:
 * BeeOS), turns interleaved across conversations as concurrent conversations are. Returns the
 * conversations and how many records were written.
 */
export const writeConversations = async (
  redisUrl: string,
  capsule: string,
  templates: { flue: Template; beeos: Template; flueConv: string; beeosConv: string },
  conversations: number,
  turns: number,
): Promise<{ conversations: Conversation[]; records: number }> => {
  const store = new RedisStore(redisUrl, { retention: { maxRecords: 0, maxAgeMs: 0 } });
  const writer = new LogWriter(store, { maxPendingEntries: 1_000_000, trimIntervalMs: 0 });
  const convs: { c: Conversation; t: Template; ids: Map<string, string> }[] = [];
  let records = 0;
  let failed = 0;
  let firstError = '';
  const before = await store.position(capsule);
  const write = async (entries: LogEntry[]): Promise<void> => {
    for (const e of entries)
      writer.append(capsule, e).catch((err: unknown) => {
        failed++;
        firstError ||= String(err);
      });
    records += entries.length;
    // Flushed every few thousand: a submission queued behind too many others fails (the writer's
    // submit timeout), as a client's would.
    if (records % 5000 < entries.length) await writer.flush();
  };
  try {
    for (let k = 0; k < conversations; k++) {
      const surface = k % 2 === 0 ? 'flue' : 'beeos';
      const t = surface === 'flue' ? templates.flue : templates.beeos;
      const ids = new Map(t.convIds.map((id) => [id, reshape(id, String(k))]));
      const surfaceId = ids.get(surface === 'flue' ? templates.flueConv : templates.beeosConv)!;
      convs.push({ c: { surface, id: surfaceId }, t, ids });
      await write(cloneAll(t.open, ids));
    }
    for (let turn = 0; turn < turns; turn++) {
      for (const { t, ids } of convs) {
        const perTurn = new Map(ids);
        for (const id of t.turnIds) perTurn.set(id, reshape(id, `${turn}`));
        await write(cloneAll(t.turn, perTurn));
      }
    }
    await writer.flush();
    const after = await store.position(capsule);
    // The gateway fronting this capsule may append a fact meanwhile: more is fine, fewer is not.
    if (failed > 0 || after.epoch !== before.epoch || after.head - before.head < records)
      throw new Error(
        `log not written whole: ${records} appended, head ${before.head} → ${after.head}, ` +
          `epoch ${before.epoch} → ${after.epoch}, ${failed} failed ${firstError}`,
      );
  } finally {
    await writer.close();
    await store.close();
  }
  return { conversations: convs.map((x) => x.c), records };
};
