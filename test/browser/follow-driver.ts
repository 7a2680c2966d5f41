/**
 * The test side of the followCapsule pages: evaluate page scripts, open the gateway's origin and
 * start following there, wait until the page delivered a given frame. Shared by the Chromium tests.
 */
import type { Page } from 'playwright-core';
import type { LastFrame } from '../client/busy-capsule.js';
import { PAGE_FOLLOW, type PageFollowArgs } from './pages/follow-page.js';

/** Page-side global, evaluated in Chromium (the tests compile without the DOM lib). */
declare const window: unknown;

/** Evaluate a page script (plain JS source: vitest transforms functions, so none is passed). */
export const run = <T>(p: Page, src: string, arg?: unknown): Promise<T> =>
  p.evaluate(([s, a]) => (0, eval)(s as string)(a) as T, [src, arg] as const);

/** Open the gateway's origin (via `base`) and start following there. */
export const startFollowing = async (p: Page, base: string, args: PageFollowArgs): Promise<void> => {
  for (let i = 0; ; i++) {
    try {
      await p.goto(`${base}/healthz`);
      break;
    } catch (err) {
      if (i >= 10) throw err; // a proxy cut the navigation itself
    }
  }
  await run(p, PAGE_FOLLOW, args);
};

/** Resolve once the page has delivered `last` (the capsule's last written frame). */
export const waitForFrame = (p: Page, last: LastFrame): Promise<unknown> =>
  p.waitForFunction(
    (l) => {
      const w = window as unknown as { __last?: { event: string; data: string } };
      return w.__last?.event === l.event && w.__last?.data === l.data;
    },
    last,
    { timeout: 60_000, polling: 100 },
  );
