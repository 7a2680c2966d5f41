/**
 * The dashboard in Chromium against a gateway fronting the demo fleet: both capsules listed with
 * their upstream state, the live tail moving. Saves a screenshot to .tmp/dashboard.png, and to
 * src/dashboard/dashboard.png (docs/client.md's) when UPDATE_SCREENSHOTS=1.
 */
import { copyFileSync, mkdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { demoGatewayForFile } from '../support/demo-gateway.js';
import { chromiumForFile, hasBrowser } from './chromium.js';
import { waitForTailToMove } from './dashboard-tail.js';

/** Page-side globals (these callbacks run in Chromium; the project's lib has no DOM). */
declare const document: {
  querySelectorAll(
    s: string,
  ): ArrayLike<{ textContent: string | null }> & Iterable<{ textContent: string | null }>;
  querySelector(s: string): { getAttribute(n: string): string | null } | null;
};

describe.skipIf(!hasBrowser)('dashboard in Chromium', () => {
  const gw = demoGatewayForFile();
  const browser = chromiumForFile();

  it('shows the demo fleet and its live tail moves', { timeout: 60_000 }, async () => {
    const page = await browser().newPage({ viewport: { width: 1280, height: 720 } });
    // Every stream request the page makes: the whole fleet must ride on one /v1/follow connection.
    const streams: string[] = [];
    page.on('request', (r) => {
      const path = new URL(r.url()).pathname;
      if (path === '/v1/follow' || path.endsWith('/records') || path.endsWith('/poll')) streams.push(path);
    });
    await page.goto(`${gw().baseUrl}/dashboard`);
    await page.waitForSelector('#fleet tbody tr[data-capsule="demo-v10"]');
    const fleet = await page.$$eval('#fleet tbody tr', (rows) =>
      rows.map((r) => ({ capsule: r.getAttribute('data-capsule'), upstream: r.children[1]?.textContent })),
    );
    expect(fleet.map((r) => r.capsule).sort()).toEqual([
      'demo-alpha',
      'demo-beta',
      'demo-v04',
      'demo-v05',
      'demo-v06',
      'demo-v10',
    ]);
    await page.waitForFunction(
      () =>
        [...document.querySelectorAll('#fleet tbody tr td:nth-child(2)')].every(
          (td) => td.textContent === 'connected',
        ),
      undefined,
      { timeout: 20_000 },
    );
    // One capsule per release line, each read off its card (the 0.5+ doors with their tokens).
    const lines = await page.$$eval('#fleet tbody tr', (rows) =>
      rows.map((r) => [r.getAttribute('data-capsule'), r.querySelector('td.release')?.textContent ?? '']),
    );
    expect(Object.fromEntries(lines.map(([id, text]) => [id, text!.split(' ')[0]]))).toEqual({
      'demo-alpha': 'spec',
      'demo-beta': 'spec',
      'demo-v04': '0.4',
      'demo-v05': '0.5',
      'demo-v06': '0.6',
      'demo-v10': '1.0',
    });
    // The tail follows the first capsule: it must show rows, and then newer ones.
    await waitForTailToMove(page);
    // Another capsule's tail at a click: what the one connection already received, no new request.
    await page.click('#fleet tbody tr[data-capsule="demo-v10"]');
    await page.waitForFunction(
      () =>
        (document.querySelector('#tail-name') as unknown as { textContent: string }).textContent ===
        '· demo-v10',
    );
    await page.waitForSelector('#tail tbody tr[data-offset]', { timeout: 20_000 });
    expect(streams).toEqual(['/v1/follow']);
    // A few refreshes so the sparklines have a shape before the picture is taken.
    await page.waitForFunction(
      () => document.querySelectorAll('svg.spark polyline[points*=" "]').length >= 2,
      undefined,
      {
        timeout: 20_000,
      },
    );
    await new Promise((r) => setTimeout(r, 4_000));
    mkdirSync('.tmp', { recursive: true });
    await page.screenshot({ path: '.tmp/dashboard.png' });
    if (process.env.UPDATE_SCREENSHOTS === '1')
      copyFileSync('.tmp/dashboard.png', 'src/dashboard/dashboard.png');
    await page.close();
  });
});
