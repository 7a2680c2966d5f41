/**
 * followMany with `share` in Chromium: two tabs of one origin following the same streams (and one
 * only the second wants) hold ONE /v1/follow connection between them: the first tab's. Each gets
 * every event of its streams once, in order. When the first tab closes, the second takes the
 * connection over from its own cursors and loses nothing.
 */
import { randomUUID } from 'node:crypto';
import type { BrowserContext, Page } from 'playwright-core';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { chromiumForFile, hasBrowser } from './chromium.js';
import { PAGE_EVENTS, PAGE_FOLLOW_MANY } from './pages/follow-many-page.js';
import { run } from './follow-driver.js';

const KEYS = Array.from({ length: 10 }, (_, i) => `ds:tabs/s${i}`);
const EXTRA = 'ds:tabs/extra';

let context: BrowserContext | null = null;
let gw: TestGateway | null = null;

interface Delivered {
  stream: string;
  cursor: string;
  data: unknown;
}

describe.skipIf(!hasBrowser)('followMany shared across tabs in Chromium', () => {
  const browser = chromiumForFile();
  afterEach(async () => {
    await context?.close();
    await gw?.close();
    context = null;
    gw = null;
  });

  it(
    'two tabs, one connection; the second takes it over when the first closes',
    { timeout: 90_000 },
    async () => {
      gw = await startTestGateway({
        capsules: {},
        extra: { durableStreams: { writable: true } },
        tuning: { streams: { keyPrefix: `test:follow-shared:${randomUUID()}` } },
      });
      const base = gw.baseUrl;
      for (const key of [...KEYS, EXTRA])
        expect(
          (
            await fetch(`${base}/v1/stream/${key.slice(3)}`, {
              method: 'PUT',
              headers: { 'content-type': 'application/json' },
            })
          ).status,
        ).toBe(201);
      let written = 0;
      const writeRound = async () => {
        const n = written++;
        await Promise.all(
          [...KEYS, EXTRA].map((key) =>
            fetch(`${base}/v1/stream/${key.slice(3)}`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify([n]),
            }),
          ),
        );
      };
      context = await browser().newContext();
      const follows = new Map<Page, number>();
      const open = async (streams: string[]) => {
        const page = await context!.newPage();
        follows.set(page, 0);
        page.on('request', (r) => {
          if (new URL(r.url()).pathname === '/v1/follow') follows.set(page, follows.get(page)! + 1);
        });
        await page.goto(`${base}/healthz`);
        await run(page, PAGE_FOLLOW_MANY, {
          streams: Object.fromEntries(streams.map((k) => [k, '-1'])),
          transport: 'auto',
          share: 'fleet',
        });
        return page;
      };
      const eventsOf = (page: Page) => run<Delivered[]>(page, PAGE_EVENTS);
      const expectExact = async (page: Page, streams: string[]) => {
        await expect
          .poll(
            async () => {
              const got = await eventsOf(page);
              return streams.every((k) => got.filter((e) => e.stream === k).length >= written);
            },
            { timeout: 30_000, interval: 100 },
          )
          .toBe(true);
        const got = await eventsOf(page);
        for (const k of streams)
          expect(got.filter((e) => e.stream === k).map((e) => e.data)).toEqual(
            Array.from({ length: written }, (_, i) => i),
          );
        expect(got.every((e) => streams.includes(e.stream))).toBe(true);
      };

      const first = await open(KEYS);
      await expect.poll(() => follows.get(first)!, { timeout: 10_000 }).toBeGreaterThan(0);
      for (let i = 0; i < 5; i++) await writeRound();
      const second = await open([...KEYS, EXTRA]);
      for (let i = 0; i < 5; i++) await writeRound();
      await expectExact(first, KEYS);
      await expectExact(second, [...KEYS, EXTRA]);
      // The second tab rode on the first tab's connection.
      expect(follows.get(second)).toBe(0);

      await first.close();
      await expect.poll(() => follows.get(second)!, { timeout: 10_000 }).toBeGreaterThan(0);
      for (let i = 0; i < 5; i++) await writeRound();
      await expectExact(second, [...KEYS, EXTRA]);
    },
  );
});
