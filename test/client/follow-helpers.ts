/** Following a capsule in Node tests: collect what followCapsule delivers until a given frame. */
import { expect } from 'vitest';
import { followCapsule } from '../../src/client/index.js';
import type {
  CapsuleGap,
  CapsuleRecord,
  FollowCapsuleOptions,
  FollowState,
  Subscription,
} from '../../src/client/index.js';
import type { TestGateway } from '../support/gateway.js';
import type { LastFrame } from './busy-capsule.js';
import { loggedRecords } from './log-frames.js';

export interface Followed {
  records: CapsuleRecord[];
  gaps: CapsuleGap[];
  states: FollowState[];
}

/** Follow `alpha` until the frame `last` arrives; `done` resolves with everything seen by then. */
export const follow = (
  gateway: string,
  transport: 'auto' | 'sse' | 'long-poll',
  last: Promise<LastFrame>,
  tuning: Record<string, number> = {},
  /** Credentials and the like (`token`, `useEventSource`). */
  extra: Partial<Pick<FollowCapsuleOptions, 'token' | 'useEventSource'>> = {},
): { done: Promise<Followed>; sub: Subscription; seen: Followed } => {
  const seen: Followed = { records: [], gaps: [], states: [] };
  let target: LastFrame | null = null;
  let resolve!: () => void;
  const arrived = new Promise<void>((r) => (resolve = r));
  const isTarget = (r: CapsuleRecord | undefined): boolean =>
    !!target && r?.kind === 'frame' && r.event === target.event && r.data === target.data;
  void last.then((l) => {
    target = l;
    if (seen.records.some(isTarget)) resolve();
  });
  const sub = followCapsule({
    gateway,
    capsule: 'alpha',
    transport,
    tuning: { backoffMs: 50, ...tuning },
    ...extra,
    onRecord: (r) => {
      seen.records.push(r);
      if (isTarget(r)) resolve();
    },
    onGap: (g) => seen.gaps.push(g),
    onState: (s) => seen.states.push(s),
  });
  return { sub, seen, done: arrived.then(() => seen) };
};

/** Delivered = the log's records (the poll's JSON), from the start up to the last one delivered. */
export const expectExactLog = async (g: TestGateway, records: CapsuleRecord[]): Promise<void> => {
  const upTo = records[records.length - 1]!.offset;
  expect(records).toEqual(await loggedRecords(g.core, 'alpha', upTo));
};
