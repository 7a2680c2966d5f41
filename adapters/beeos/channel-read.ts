/**
 * Reading one channel's records from the log: the pages of its context (plus records attributed to
 * no context) through `core.readContext`, so a read costs O(the channel), not O(the capsule). Also
 * the whole-channel projection the JSON reads (status, messages) use.
 */
import type { GatewayCore } from '../../src/core/types.js';
import type { LogRecord } from '../../src/log/record.js';
import type { LogPosition } from '../../src/log/store.js';
import type { Channel } from './channels.js';
import { READ_PAGE } from './constants.js';
import { ChannelProjector } from './projection.js';
import type { Projected } from './projection.js';

export interface ChannelPage {
  records: LogRecord[];
  /** Every record of the channel up to this offset is in `records` or was before `after`. */
  next: number;
  /** The page was cut by `limit`: more may follow right after `next`. */
  full: boolean;
  position: LogPosition;
}

export const readChannelPage = async (
  core: GatewayCore,
  capsule: string,
  contextId: string,
  after: number,
  limit: number,
  tasks: readonly string[] = [],
): Promise<ChannelPage> => {
  const page = await core.readContext(capsule, contextId, after, limit, tasks);
  return { ...page, full: page.records.length >= limit };
};

/** A projector of the channel; `replyBytes` false for one whose envelopes are never streamed (JSON reads). */
export const projectorFor = (channel: Channel, agentId: string, replyBytes = true): ChannelProjector =>
  new ChannelProjector(
    {
      kind: channel.kind,
      agentId,
      contextId: channel.contextId,
      owner: channel.owner,
      taskIds: [...(channel.upstreamTaskIds ?? [])],
    },
    { replyBytes },
  );

/** Project the whole retained channel (JSON reads: status, messages). Bounded by the head at start. */
export const projectChannel = async (
  core: GatewayCore,
  channel: Channel,
  onEnvelope?: (p: Projected) => void,
): Promise<ChannelProjector> => {
  const projector = projectorFor(channel, channel.capsule, false);
  const { head } = await core.position(channel.capsule);
  let after = Math.max(0, channel.startOffset - 1);
  while (after < head) {
    const page = await readChannelPage(
      core,
      channel.capsule,
      channel.contextId,
      after,
      READ_PAGE,
      projector.linkedTasks(),
    );
    for (const record of page.records) {
      if (record.offset > head) return projector;
      for (const p of projector.project(record).envelopes) onEnvelope?.(p);
    }
    if (page.next <= after) break;
    after = page.next;
  }
  return projector;
};
