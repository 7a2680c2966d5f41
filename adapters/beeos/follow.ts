/**
 * A BeeOS task or conversation as `GET /v1/follow` holds it (`beeos:{agent}/tasks/{id}`,
 * `beeos:{agent}/conversations/{id}`): the envelopes `…/events` streams (`message`, deltas left
 * out as that route does by default), its `end` and its `backfill_truncated` notices, each an event
 * of the stream; the cursor is BeeOS `since`. The channel is projected record by record from its
 * first record (as `…/events` replays it), so each event's cursor is exact: a message's is its
 * envelope offset, and once a record is read the cursor moves past every slot of it
 * (`offset * OFFSET_SLOTS + OFFSET_SLOTS - 1`), so an `end` or a notice is never told twice.
 */
import { may, seesCapsule, type Principal } from '../../src/auth/principal.js';
import { isStoreReset } from '../../src/core/store-reset.js';
import type { GatewayCore } from '../../src/core/types.js';
import type { FollowEvent, FollowOpen, FollowSource } from '../../src/http/surface.js';
import type { Channel, ChannelRegistry } from './channels.js';
import { HINT_AHEAD, HINT_RESET, HINT_TRUNCATED } from './channel-listener.js';
import { projectorFor, readChannelPage } from './channel-read.js';
import { OFFSET_SLOTS } from './constants.js';
import type { ChannelProjector } from './projection.js';

export interface BeeosFollowDeps {
  core: GatewayCore;
  registry: ChannelRegistry;
}

const NAME = /^([^/]+)\/(tasks|conversations)\/([^/]+)$/;
const SINCE = /^\d{1,16}$/;
/** The last `since` of a log record: past every envelope it projects to. */
const pastRecord = (offset: number): number => offset * OFFSET_SLOTS + OFFSET_SLOTS - 1;

interface Standing {
  cursor: string;
  /** Envelopes at or below it are told. */
  since: number;
  /** Log records up to it are projected. */
  after: number;
  projector: ChannelProjector;
}

const truncated = (oldest: number, since: number, hint: string, cursor: number): FollowEvent => ({
  event: 'backfill_truncated',
  data: { oldest_redis_offset: oldest, since, hint },
  cursor: String(cursor),
});

export const beeosFollow = (deps: BeeosFollowDeps): FollowSource => ({
  scheme: 'beeos',
  open: async (principal: Principal, name: string, cursor: string): Promise<FollowOpen> => {
    const { core, registry } = deps;
    const none: FollowOpen = { ok: false, status: 404, message: 'no such stream' };
    const m = NAME.exec(name);
    if (!m) return none;
    const agent = m[1]!;
    const kind: Channel['kind'] = m[2] === 'tasks' ? 'task' : 'conversation';
    // As guardAgent and guardChannel: the agent visible to the key, the `submit` scope, a channel
    // of that kind of the caller's owner (another owner's is not found, like an unknown one).
    if (!core.hasCapsule(agent) || !seesCapsule(principal, agent) || !may(principal, 'submit', agent))
      return none;
    if (cursor !== '-1' && cursor !== 'now' && !(SINCE.test(cursor) && Number.isSafeInteger(Number(cursor))))
      return { ok: false, status: 400, message: 'the cursor must be -1, now or a since offset' };
    const channel = await registry.get(agent, m[3]!, principal.owner);
    if (!channel || channel.kind !== kind || channel.owner !== principal.owner) return none;
    if (channel.pending) await channel.pending.catch(() => undefined);
    const start =
      cursor === '-1'
        ? '0'
        : cursor === 'now'
          ? String(pastRecord((await core.position(agent)).head))
          : cursor;

    let standing: Standing | null = null;
    /** A projector from the channel's first retained record, and the notices `…/events` opens with. */
    const replay = async (at: string): Promise<{ standing: Standing; events: FollowEvent[] }> => {
      let since = Number(at);
      const position = await core.position(agent);
      const events: FollowEvent[] = [];
      const first = channel.startOffset;
      if (Math.floor(since / OFFSET_SLOTS) > position.head) {
        events.push(truncated(position.first * OFFSET_SLOTS, since, HINT_AHEAD, 0));
        since = 0;
      } else {
        const needed = since === 0 ? first : Math.max(first, Math.floor(since / OFFSET_SLOTS) + 1);
        if (needed < position.first && first < position.first) {
          const passed = Math.max(since, pastRecord(position.first - 1));
          events.push(truncated(position.first * OFFSET_SLOTS, since, HINT_TRUNCATED, passed));
          since = passed;
        }
      }
      const after = Math.max(first, position.first) - 1;
      const projector = projectorFor(channel, agent);
      return { standing: { cursor: String(since), since, after, projector }, events };
    };

    return {
      ok: true,
      cursor: start,
      target: {
        read: async (at, limit, waitMs, signal) => {
          let events: FollowEvent[] = [];
          if (standing?.cursor !== at) ({ standing, events } = await replay(at));
          const s = standing;
          const read = () =>
            readChannelPage(core, agent, channel.contextId, s.after, limit, s.projector.linkedTasks());
          let page = await read();
          if (
            events.length === 0 &&
            page.records.length === 0 &&
            page.next <= s.after &&
            waitMs > 0 &&
            !signal.aborted
          ) {
            // At the head: one wait on the hub's reader of the capsule, then read what came.
            await core.waitAfter(agent, page.position.head, 1, waitMs, signal);
            page = await read();
          }
          if (page.position.first > s.after + 1 && s.after + 1 >= channel.startOffset) {
            // Records this reader had not read were trimmed: start over, told what was lost.
            standing = null;
            return { events, cursor: s.cursor };
          }
          for (const record of page.records) {
            if (record.offset <= s.after) continue;
            if (isStoreReset(record) && record.offset * OFFSET_SLOTS > s.since)
              events.push(truncated(record.offset * OFFSET_SLOTS, s.since, HINT_RESET, s.since));
            const step = s.projector.project(record);
            for (const p of step.envelopes)
              if (p.offset > s.since && !p.delta)
                events.push({ event: 'message', data: p.envelope, cursor: String(p.offset) });
            const past = pastRecord(record.offset);
            if (step.end && past > s.since)
              events.push({ event: 'end', data: { reason: step.end }, cursor: String(past) });
            s.after = record.offset;
            s.since = Math.max(s.since, past);
          }
          if (page.next > s.after) {
            s.after = page.next;
            s.since = Math.max(s.since, pastRecord(page.next));
          }
          s.cursor = String(s.since);
          return { events, cursor: s.cursor };
        },
      },
    };
  },
});
