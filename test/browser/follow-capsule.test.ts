/**
 * followCapsule in Chromium, on real HTTP, through TCP proxies that kill connections the way
 * middleboxes do: every record of the log once, in offset order; the switch to long-poll behind a
 * proxy that kills idle connections; and a reload that resumes from the cursor in sessionStorage.
 */
import type { Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { followPageRig } from '../support/follow-page-rig.js';
import { stopAfterTest } from '../support/stop-after-test.js';
import { runBursts, runBusy } from '../client/busy-capsule.js';
import { startCuttingProxy } from '../client/cutting-proxy.js';
import { loggedRecords } from '../client/log-frames.js';
import { hasBrowser } from './chromium.js';
import { PAGE_FOLLOW, PAGE_RECORDS } from './pages/follow-page.js';
import { reloadTwiceMidStream, run, startFollowing, waitForFrame } from './follow-driver.js';

/** Page-side global (these callbacks run in Chromium; the project's lib has no DOM). */
declare const window: unknown;

/** A record as the page stored it: the poll's JSON (frames, facts, submissions). */
interface Delivered {
  offset: number;
  [field: string]: unknown;
}

describe.skipIf(!hasBrowser)('followCapsule in Chromium', () => {
  const rig = followPageRig();
  const setup = () => rig.start();

  const expectExactLog = async (delivered: Delivered[]): Promise<void> => {
    const upTo = delivered[delivered.length - 1]!.offset;
    expect(delivered).toEqual(await loggedRecords(rig.gw.core, 'alpha', upTo));
  };

  const states = (p: Page) =>
    p.evaluate(() => (window as unknown as { __states: { state: string; transport: string }[] }).__states);

  it(
    'through a proxy that kills every connection after 1 s: a busy capsule, every record once, in order',
    { timeout: 90_000 },
    async () => {
      const { sim, gw } = await setup();
      const proxy = stopAfterTest(await startCuttingProxy(gw.baseUrl, { lifetimeMs: 1_000 }));
      await startFollowing(rig.page, proxy.url, { capsule: 'alpha', transport: 'auto' });
      const last = await runBusy(sim, 10, 80, 3);
      await waitForFrame(rig.page, last);
      const delivered = await run<Delivered[]>(rig.page, PAGE_RECORDS);
      await expectExactLog(delivered);
      expect(delivered.length).toBeGreaterThan(800);
      expect(proxy.kills).toBeGreaterThanOrEqual(2);
    },
  );

  it(
    'through a proxy that kills connections idle 2 s, quiet 5 s between bursts: switches to long-poll, loses nothing',
    { timeout: 90_000 },
    async () => {
      const { sim, gw } = await setup();
      const proxy = stopAfterTest(await startCuttingProxy(gw.baseUrl, { idleMs: 2_000 }));
      await startFollowing(rig.page, proxy.url, { capsule: 'alpha', transport: 'auto' });
      const last = await runBursts(sim, 3, 5_000);
      await waitForFrame(rig.page, last);
      await expectExactLog(await run<Delivered[]>(rig.page, PAGE_RECORDS));
      const seen = await states(rig.page);
      expect(seen).toContainEqual(expect.objectContaining({ state: 'fallback', transport: 'long-poll' }));
      expect(proxy.kills).toBeGreaterThanOrEqual(2);
    },
  );

  it(
    'a reload resumes from the cursor kept in sessionStorage, without a duplicate',
    { timeout: 90_000 },
    async () => {
      const { sim, gw } = await setup();
      await startFollowing(rig.page, gw.baseUrl, { capsule: 'alpha', transport: 'auto' });
      const busy = runBusy(sim, 6, 80, 4);
      // Reload twice mid-stream, each time once the page has delivered something new.
      await reloadTwiceMidStream(rig.page, {
        more: 50,
        script: PAGE_FOLLOW,
        args: { capsule: 'alpha', transport: 'auto' },
      });
      await waitForFrame(rig.page, await busy);
      await expectExactLog(await run<Delivered[]>(rig.page, PAGE_RECORDS));
    },
  );
});
