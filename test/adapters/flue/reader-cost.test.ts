/**
 * Reads scale with what is read: the state of a conversation is rebuilt from its own records (the
 * context read), not the capsule's, and an updates read from an offset a previous read ended at
 * starts from that cached state and reads only what came after it. Counted on an in-memory log
 * where one conversation shares the capsule with a busy context 50 times its size.
 */
import { describe, expect, it } from 'vitest';
import { readCycle, rebuild } from '../../../adapters/flue/conversation-reader.js';
import { ConversationProjector } from '../../../adapters/flue/projection.js';
import { SnapshotCache } from '../../../adapters/flue/snapshot-cache.js';
import type { LogEntry } from '../../../src/log/record.js';
import { EPOCH, logCore } from './log-core.js';
import { numbered, status, submission, text } from './records.js';

const CONV = 'conv-1';

const turn = (ctx: string, n: number, chunks: number): LogEntry[] => [
  submission(ctx, `s_${ctx}_${n}`, `hi ${n}`),
  status(`tsk_${ctx}_${n}`, ctx, 'working', 'inference turn 1'),
  ...Array.from({ length: chunks }, (_, i) => text(`tsk_${ctx}_${n}`, `w${i} `)),
  status(`tsk_${ctx}_${n}`, ctx, 'completed', 'session ended', 'reply'),
];

describe('flue reads cost the conversation, not the capsule', () => {
  it('rebuilds from the context read and resumes a read from the cached state at its offset', async () => {
    const entries: LogEntry[] = [];
    for (let n = 0; n < 10; n++) entries.push(...turn(CONV, n, 3), ...turn('ctx_busy', n, 300));
    const records = numbered(entries);
    const conversation = records.filter((r) =>
      r.kind === 'submission' ? r.contextId === CONV : r.kind === 'frame' && r.data.includes(`tsk_${CONV}_`),
    );
    const log = logCore(records);
    // Everything but the conversation's last turn (and the busy turn after it) is in the log.
    const lastTurn = records.findIndex(
      (r) => r.kind === 'submission' && r.contextId === CONV && r.messageId === `msg_s_${CONV}_9`,
    );
    log.append(lastTurn);
    const cache = new SnapshotCache();
    const deps = { core: log.core, cache };
    const head = records[lastTurn - 1]!.offset;

    const state = await rebuild(deps, 'cap', CONV, EPOCH, head);
    expect(log.counts.contextRecords).toBe(conversation.filter((r) => r.offset <= head).length);
    expect(log.counts.contextRecords).toBeLessThan(lastTurn / 50);
    cache.put('cap', head, state);

    log.append(records.length);
    log.counts.contextRecords = 0;
    const resumed = await rebuild(deps, 'cap', CONV, EPOCH, head);
    expect(log.counts.contextRecords).toBe(0);
    const cycle = await readCycle(log.core, 'cap', resumed, head, 100);
    // Only the conversation's last turn was read (6 records), not the 302 busy records around it.
    expect(log.counts.contextRecords).toBe(6);

    const fresh = new ConversationProjector(CONV, EPOCH);
    const expected = records.flatMap((r) => {
      const chunks = fresh.project(r);
      return r.offset > head ? chunks : [];
    });
    expect(JSON.parse(JSON.stringify(cycle.chunks))).toEqual(JSON.parse(JSON.stringify(expected)));
    expect(cycle.next).toBe(records[records.length - 1]!.offset);
    expect(cycle.upToDate).toBe(true);
  });
});
