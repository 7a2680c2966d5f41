/**
 * A reader that knows a task is its context's before the log says so (a BeeOS channel's accepted
 * submission, before its outcome record is durable or after it aged out) names it to readContext:
 * the task's frames still waiting for a context are in its pages, in order, and a BeeOS projector
 * fed those pages as the log grows projects exactly what the same projector over the whole log does.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ChannelProjector, type Projected } from '../../adapters/beeos/projection.js';
import { Hub } from '../../src/hub/hub.js';
import { viewFrame } from '../../src/log/frame-view.js';
import { MemoryStore } from '../../src/log/memory-store.js';
import type { LogEntry, LogRecord } from '../../src/log/record.js';
import { recordTasks, type RecordedTask } from './context-workload.js';

let tasks: RecordedTask[] = [];
beforeAll(async () => {
  tasks = await recordTasks(8);
}, 60_000);

const spec = (contextId: string, taskIds: string[]) => ({
  kind: 'conversation' as const,
  agentId: 'c',
  contextId,
  owner: 'o',
  taskIds,
});

const taskOf = (task: RecordedTask): string =>
  task.frames.map((f) => viewFrame({ ...f, offset: 0 })?.taskId).find(Boolean)!;

/** Every task loses the frames that name its context; another context's tasks run beside it. */
const logOf = (own: RecordedTask, others: RecordedTask[]): LogEntry[] => {
  const loose = own.frames.filter((f) => !f.data.includes('"context_id"'));
  const out: LogEntry[] = [
    {
      kind: 'submission',
      protocol: 'beeos',
      owner: 'o',
      contextId: 'ctx-own',
      messageId: 'm1',
      text: 'hi',
      receivedAt: 1,
    },
  ];
  const rest = others.flatMap((t) => t.frames);
  for (let i = 0; i < Math.max(loose.length, rest.length); i++) {
    if (loose[i]) out.push(loose[i]!);
    if (rest[i]) out.push(rest[i]!);
  }
  return out;
};

describe('readContext with the tasks a reader knows', () => {
  it('brings the frames of a task the log has not linked, and equals the whole-log projection', async () => {
    const own = tasks.find((t) => t.frames.some((f) => !f.data.includes('"context_id"')))!;
    const task = taskOf(own);
    const log = logOf(
      own,
      tasks.filter((t) => t !== own),
    );
    const store = new MemoryStore();
    const hub = new Hub(store, { pageSize: 5, dissolveMs: 60_000 });
    try {
      const reader = new ChannelProjector(spec('ctx-own', [task]), { replyBytes: false });
      const got: Projected[] = [];
      const seen: number[] = [];
      let cursor = 0;
      for (let i = 0; i < log.length; i += 3) {
        await store.append('c', log.slice(i, i + 3));
        for (;;) {
          const page = await hub.readContext('c', 'ctx-own', cursor, 4, reader.linkedTasks());
          for (const r of page.records) {
            seen.push(r.offset);
            got.push(...reader.project(r).envelopes);
          }
          if (page.next === cursor) break;
          cursor = page.next;
        }
      }
      const { records: whole } = await store.read('c', 0, 1_000_000);
      const oracle = new ChannelProjector(spec('ctx-own', [task]), { replyBytes: false });
      const expected = whole.flatMap((r: LogRecord) => oracle.project(r).envelopes);
      expect(new Set(seen).size).toBe(seen.length);
      expect([...seen].sort((a, b) => a - b)).toEqual(seen);
      expect(expected.length).toBeGreaterThan(1);
      expect(got).toEqual(expected);
      // Without the task named, the same read leaves its frames out (no record links them).
      const blind = await hub.readContext('c', 'ctx-own', 0, 1_000_000);
      expect(blind.records.length).toBe(1);
    } finally {
      await hub.close();
    }
  });
});
