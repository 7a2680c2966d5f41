/**
 * The test side of the followCapsule pages: evaluate page scripts, open the gateway's origin and
 * start following there, wait until the page delivered a given frame. Shared by the Chromium tests.
 */
import type { Page } from 'playwright-core';
import type { LastFrame } from '../client/busy-capsule.js';
import { PAGE_FOLLOW, type PageFollowArgs } from './pages/follow-page.js';

/** Page-side globals, evaluated in Chromium (the tests compile without the DOM lib). */
declare const window: unknown;
declare const sessionStorage: { getItem(key: string): string | null };

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

/** A reload mid-stream: after `more` records beyond the page's count, run `script` with `args` again. */
export interface MidStreamReload {
  more: number;
  script: string;
  args: unknown;
}

/**
 * Reload the page twice mid-stream, each time once it has delivered `more` records beyond the count
 * it keeps in sessionStorage: the page must resume from the cursors it kept there.
 */
export const reloadTwiceMidStream = async (
  p: Page,
  { more, script, args }: MidStreamReload,
): Promise<void> => {
  for (let i = 0; i < 2; i++) {
    const before = Number(await p.evaluate(() => sessionStorage.getItem('count') ?? '0'));
    await p.waitForFunction((n) => Number(sessionStorage.getItem('count') ?? '0') > n, before + more, {
      timeout: 30_000,
      polling: 50,
    });
    await p.reload();
    await run(p, script, args);
  }
};
