/**
 * followCapsule in Chromium, on real HTTP, through TCP proxies that kill connections the way
 * middleboxes do: every record of the log once, in offset order; the switch to long-poll behind a
 * proxy that kills idle connections; and a reload that resumes from the cursor in sessionStorage.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { runBursts, runBusy } from '../client/busy-capsule.js';
import { startCuttingProxy, type CuttingProxy } from '../client/cutting-proxy.js';
import { loggedRecords } from '../client/log-frames.js';
import { hasBrowser, launchChromium } from './chromium.js';
import { PAGE_FOLLOW, PAGE_RECORDS } from './pages/follow-page.js';
import { run, startFollowing, waitForFrame } from './follow-driver.js';

/** Page-side globals (these callbacks run in Chromium; the project's lib has no DOM). */
declare const window: unknown;
declare const sessionStorage: { getItem(key: string): string | null };

let browser: Browser | null = null;
let sim: SimulatedCapsule | null = null;
let gw: TestGateway | null = null;
let proxy: CuttingProxy | null = null;
let page: Page | null = null;

/** A record as the page stored it: the poll's JSON (frames, facts, submissions). */
interface Delivered {
  offset: number;
  [field: string]: unknown;
}

describe.skipIf(!hasBrowser)('followCapsule in Chromium', () => {
  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
  });
  afterEach(async () => {
    await page?.close();
    await proxy?.close();
    await gw?.close();
    await sim?.stop();
    page = proxy = gw = sim = null;
  });

  const setup = async (): Promise<{ sim: SimulatedCapsule; gw: TestGateway }> => {
    sim = await startSimulator({ taskAcceptance: 'queue' });
    gw = await startTestGateway({ capsules: { alpha: sim.url }, config: { heartbeatMs: 15_000 } });
    // Bundle the client module once before any proxy can cut the request that triggers it.
    expect((await fetch(`${gw.baseUrl}/client/murmur-gateway.js`)).status).toBe(200);
    page = await browser!.newPage();
    return { sim, gw };
  };

  const expectExactLog = async (delivered: Delivered[]): Promise<void> => {
    const upTo = delivered[delivered.length - 1]!.offset;
    expect(delivered).toEqual(await loggedRecords(gw!.core, 'alpha', upTo));
  };

  const states = (p: Page) =>
    p.evaluate(() => (window as unknown as { __states: { state: string; transport: string }[] }).__states);

  it(
    'through a proxy that kills every connection after 1 s: a busy capsule, every record once, in order',
    { timeout: 90_000 },
    async () => {
      const { sim, gw } = await setup();
      proxy = await startCuttingProxy(gw.baseUrl, { lifetimeMs: 1_000 });
      await startFollowing(page!, proxy.url, { capsule: 'alpha', transport: 'auto' });
      const last = await runBusy(sim, 10, 80, 3);
      await waitForFrame(page!, last);
      const delivered = await run<Delivered[]>(page!, PAGE_RECORDS);
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
      proxy = await startCuttingProxy(gw.baseUrl, { idleMs: 2_000 });
      await startFollowing(page!, proxy.url, { capsule: 'alpha', transport: 'auto' });
      const last = await runBursts(sim, 3, 5_000);
      await waitForFrame(page!, last);
      await expectExactLog(await run<Delivered[]>(page!, PAGE_RECORDS));
      const seen = await states(page!);
      expect(seen).toContainEqual(expect.objectContaining({ state: 'fallback', transport: 'long-poll' }));
      expect(proxy.kills).toBeGreaterThanOrEqual(2);
    },
  );

  it(
    'a reload resumes from the cursor kept in sessionStorage, without a duplicate',
    { timeout: 90_000 },
    async () => {
      const { sim, gw } = await setup();
      await startFollowing(page!, gw.baseUrl, { capsule: 'alpha', transport: 'auto' });
      const busy = runBusy(sim, 6, 80, 4);
      // Reload twice mid-stream, each time once the page has delivered something new.
      for (let i = 0; i < 2; i++) {
        const before = Number(await page!.evaluate(() => sessionStorage.getItem('count') ?? '0'));
        await page!.waitForFunction((n) => Number(sessionStorage.getItem('count') ?? '0') > n + 50, before, {
          timeout: 30_000,
          polling: 50,
        });
        await page!.reload();
        await run(page!, PAGE_FOLLOW, { capsule: 'alpha', transport: 'auto' });
      }
      await waitForFrame(page!, await busy);
      await expectExactLog(await run<Delivered[]>(page!, PAGE_RECORDS));
    },
  );
});
