/** What a follower must deliver: every record of the log, as the long-poll shows it, in offset order. */
import { recordJson } from '../../src/http/record-json.js';
import type { GatewayCore } from '../../src/core/types.js';

export interface LoggedFrame {
  offset: number;
  event: string;
  data: string;
}

/** Every record up to `upTo`, in the poll's JSON shape (the client's CapsuleRecord). */
export const loggedRecords = async (
  core: GatewayCore,
  capsule: string,
  upTo?: number,
): Promise<Record<string, unknown>[]> => {
  const out: Record<string, unknown>[] = [];
  let after = 0;
  for (;;) {
    const { records } = await core.read(capsule, after, 1000);
    if (records.length === 0) break;
    for (const r of records) {
      after = r.offset;
      if (upTo !== undefined && r.offset > upTo) return out;
      out.push(JSON.parse(JSON.stringify(recordJson(r))) as Record<string, unknown>);
    }
  }
  return out;
};

/** The frames among them, as {offset, event, data}. */
export const loggedFrames = async (
  core: GatewayCore,
  capsule: string,
  upTo?: number,
): Promise<LoggedFrame[]> =>
  (await loggedRecords(core, capsule, upTo))
    .filter((r) => r.kind === 'frame')
    .map((r) => ({ offset: r.offset as number, event: r.event as string, data: r.data as string }));
