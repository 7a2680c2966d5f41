/**
 * The official @flue/sdk, bundled with esbuild into a page, running send → observe → read in
 * Chromium against the gateway: same-origin (the page on the gateway's origin) and cross-origin
 * (the page on another 127.0.0.1 port, the gateway configured with `cors.origins`).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Page } from 'playwright-core';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { chromiumForFile, hasBrowser } from './chromium.js';
import { bundlePage } from './page-bundle.js';

/** Page-side global (this callback runs in Chromium; the project's lib has no DOM). */
declare const window: unknown;

let bundle = '';
let sim: SimulatedCapsule | null = null;
let gw: TestGateway | null = null;
let site: Server | null = null;

interface FlueRun {
  text: string;
  observedMessages: unknown[];
  historyMessages: { role: string }[];
  settlements: { outcome: string }[];
}

/** A static site on its own origin serving one page with the bundle. */
const startSite = async (): Promise<{ server: Server; origin: string }> => {
  const server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(`<!doctype html><meta charset="utf-8"><title>flue</title><script>${bundle}</script>`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
};

const runIn = (page: Page, url: string, live: 'sse' | 'long-poll'): Promise<FlueRun> =>
  page.evaluate(
    ([u, l]) => (window as unknown as { runFlue(u: string, l: string): Promise<FlueRun> }).runFlue(u, l),
    [url, live] as const,
  );

const expectConversation = (run: FlueRun): void => {
  expect(run.text).toBe('Echo: hello from chromium');
  expect(run.historyMessages.map((m) => m.role)).toEqual(['user', 'assistant']);
  expect(run.observedMessages).toEqual(run.historyMessages);
  expect(run.settlements.map((s) => s.outcome)).toEqual(['completed']);
};

describe.skipIf(!hasBrowser)('@flue/sdk in Chromium', () => {
  const browser = chromiumForFile();
  beforeAll(async () => {
    bundle = await bundlePage('flue-page.ts', 'es2020');
  });
  afterEach(async () => {
    await gw?.close();
    await sim?.stop();
    await new Promise<void>((resolve) => (site ? site.close(() => resolve()) : resolve()));
    gw = sim = site = null;
  });

  it('same origin: send → observe (SSE) → read', async () => {
    sim = await startSimulator({ taskAcceptance: 'single' });
    gw = await startTestGateway({ capsules: { alpha: sim.url } });
    const page = await browser().newPage();
    await page.goto(`${gw.baseUrl}/healthz`);
    await page.addScriptTag({ content: bundle });
    expectConversation(await runIn(page, `${gw.baseUrl}/flue/alpha/conv-same`, 'sse'));
    await page.close();
  });

  for (const live of ['sse', 'long-poll'] as const) {
    it(`cross-origin with CORS configured: send → observe (${live}) → read`, async () => {
      const s = await startSite();
      site = s.server;
      sim = await startSimulator({ taskAcceptance: 'single' });
      gw = await startTestGateway({ capsules: { alpha: sim.url }, config: { corsOrigins: [s.origin] } });
      const page = await browser().newPage();
      await page.goto(`${s.origin}/`);
      expectConversation(await runIn(page, `${gw.baseUrl}/flue/alpha/conv-cross-${live}`, live));
      await page.close();
    });
  }

  it('cross-origin without CORS for that origin: the browser refuses', async () => {
    const s = await startSite();
    site = s.server;
    sim = await startSimulator({ taskAcceptance: 'single' });
    gw = await startTestGateway({
      capsules: { alpha: sim.url },
      config: { corsOrigins: ['http://elsewhere.example'] },
    });
    const page = await browser().newPage();
    await page.goto(`${s.origin}/`);
    await expect(runIn(page, `${gw.baseUrl}/flue/alpha/conv-refused`, 'sse')).rejects.toThrow(/fetch/i);
    await page.close();
  });
});
