/**
 * A capsule's log as `GET /v1/follow` holds it (`murmur:{capsule}`): the records the long-poll
 * returns, each as it shows them, the cursor being the poll's `after` (an offset). A retention or
 * "ahead" gap is an event of its own (`gap`, the poll's gap object) before the stream goes on from
 * what the log still holds; frames-possibly-missing facts are records like any other.
 */
import { may, seesCapsule, type Principal } from '../../src/auth/principal.js';
import type { GatewayCore } from '../../src/core/types.js';
import type { FollowEvent, FollowOpen, FollowSource } from '../../src/http/surface.js';
import type { LogRecord } from '../../src/log/record.js';
import type { LogPosition } from '../../src/log/store.js';
import { recordJson } from '../../src/http/record-json.js';
import { pollGap } from './poll-json.js';

const OFFSET = /^(0|[1-9][0-9]{0,15})$/;

const page = async (
  core: GatewayCore,
  capsule: string,
  after: number,
  limit: number,
  waitMs: number,
  signal: AbortSignal,
): Promise<{ records: readonly LogRecord[]; position: LogPosition }> => {
  const { status, position } = await core.cursorStatus(capsule, after);
  // Never wait on a cursor the log has not reached: its gap is the answer.
  if (status === 'ahead') return { records: [], position };
  if (status === 'gone' || waitMs === 0) return core.read(capsule, after, limit);
  return core.waitAfter(capsule, after, limit, waitMs, signal);
};

export const murmurFollow = (core: GatewayCore): FollowSource => ({
  scheme: 'murmur',
  open: async (principal: Principal, capsule: string, cursor: string): Promise<FollowOpen> => {
    // Capsule-wide: every owner's records, so the operator scope, as on /murmur/{c}/poll.
    if (!core.hasCapsule(capsule) || !seesCapsule(principal, capsule) || !may(principal, 'observe', capsule))
      return { ok: false, status: 404, message: 'no such stream' };
    let start: number;
    if (cursor === '-1') start = 0;
    else if (cursor === 'now') start = (await core.position(capsule)).head;
    else if (OFFSET.test(cursor)) start = Number(cursor);
    else return { ok: false, status: 400, message: 'the cursor must be -1, now or an offset' };
    return {
      ok: true,
      cursor: String(start),
      target: {
        read: async (at, limit, waitMs, signal) => {
          const after = Number(at);
          const { records, position } = await page(core, capsule, after, limit, waitMs, signal);
          const events: FollowEvent[] = [];
          const gap = pollGap(after, records, position);
          let next = after;
          if (gap && gap.reason !== 'possibly_missing') {
            next = records.length > 0 ? after : gap.first_available - 1;
            events.push({ event: 'gap', data: gap, cursor: String(next) });
          }
          for (const r of records)
            events.push({ event: 'record', data: recordJson(r), cursor: String(r.offset) });
          const last = records[records.length - 1];
          return { events, cursor: String(last ? last.offset : next) };
        },
      },
    };
  },
});
