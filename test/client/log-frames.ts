/** What a follower must deliver: the log's frames that carry a capsule id, in offset order. */
import type { GatewayCore } from '../../src/core/types.js';

export interface LoggedFrame {
  offset: number;
  event: string;
  data: string;
}

export const loggedFrames = async (
  core: GatewayCore,
  capsule: string,
  upTo?: number,
): Promise<LoggedFrame[]> => {
  const frames: LoggedFrame[] = [];
  let after = 0;
  for (;;) {
    const { records } = await core.read(capsule, after, 1000);
    if (records.length === 0) break;
    for (const r of records) {
      after = r.offset;
      if (upTo !== undefined && r.offset > upTo) return frames;
      if (r.kind === 'frame' && r.upstreamId !== null && r.event !== 'connection-ack')
        frames.push({ offset: r.offset, event: r.event, data: r.data });
    }
  }
  return frames;
};
