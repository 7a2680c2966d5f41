/**
 * The AI SDK's chat client (`ai`, bundled with esbuild into a page) in Chromium against the gateway:
 * a page reloaded mid-turn loads the chat's history, resumes the running turn from its `start`, and
 * ends with the same one assistant message the gateway's history holds.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { UIMessage } from 'ai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { chromiumForFile, hasBrowser } from './chromium.js';
import { bundlePage } from './page-bundle.js';

/** Page-side global (these callbacks run in Chromium; the project's lib has no DOM). */
declare const document: {
  querySelector(s: string): { textContent: string | null } | null;
};
declare const window: {
  aiChat: {
    ready(): Promise<void>;
    send(text: string): Promise<void>;
    /** `history`: what the page loaded at mount. */
    snapshot(): Promise<{ messages: UIMessage[]; status: string; history: UIMessage[] }>;
  };
};

const CHUNKS = 40;

describe.skipIf(!hasBrowser)('the ai chat client in Chromium', () => {
  let sim: SimulatedCapsule | null = null;
  let gw: TestGateway | null = null;
  let site: Server | null = null;
  let origin = '';

  const browser = chromiumForFile();
  beforeAll(async () => {
    const bundle = await bundlePage('ai-chat-page.ts', 'es2022');
    // The page on its own origin, as an app's would be; the gateway allows it (CORS).
    site = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(`<!doctype html><meta charset="utf-8"><title>chat</title><script>${bundle}</script>`);
    });
    await new Promise<void>((resolve) => site!.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    sim = await startSimulator({ taskAcceptance: 'single', frameDelayMs: 25 });
    gw = await startTestGateway({
      capsules: { alpha: sim.url },
      config: { corsOrigins: [origin] },
      tuning: { queue: { orphanGraceMs: 100 } },
    });
  }, 30_000);
  afterAll(async () => {
    await gw?.close();
    await sim?.stop();
    await new Promise<void>((resolve) => (site ? site.close(() => resolve()) : resolve()));
  });

  it('a page reloaded mid-turn resumes it and ends with the one assistant message', async () => {
    const api = `${gw!.baseUrl}/ai-sdk/alpha/chat`;
    const page = await browser().newPage();
    await page.goto(`${origin}/?api=${encodeURIComponent(api)}&chat=reload`);
    await page.evaluate(() => window.aiChat.ready());
    await page.evaluate((text) => window.aiChat.send(text), `#sim {"chunks":${CHUNKS}}`);
    // Mid-turn: some of the reply is on the page, not all of it.
    await page.waitForFunction(async () => {
      const { messages } = await window.aiChat.snapshot();
      const text = messages.at(-1)?.parts.find((p) => p.type === 'text') as { text: string } | undefined;
      return (
        messages.length === 2 && !!text && text.text.includes('chunk 3 ') && !text.text.includes('chunk 40')
      );
    });
    await page.reload();
    await page.evaluate(() => window.aiChat.ready());
    const after = await page.evaluate(() => window.aiChat.snapshot());
    expect(after.status).toBe('ready');
    // The reloaded page found the turn unfinished: the resumed stream finished it.
    expect(JSON.stringify(after.history)).not.toContain(`chunk ${CHUNKS}`);
    expect(after.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    const text = after.messages[1]!.parts.filter((p) => p.type === 'text');
    expect(text).toEqual([
      expect.objectContaining({
        text: Array.from({ length: CHUNKS }, (_, i) => `chunk ${i + 1}`).join(' '),
        state: 'done',
      }),
    ]);
    const history = (await (await fetch(`${api}/reload/messages`)).json()) as UIMessage[];
    expect(after.messages).toEqual(history);
    await page.close();
  });

  it('the gateway’s own chat page (no build step) sends, and resumes after a reload', async () => {
    const page = await browser().newPage();
    await page.goto(`${gw!.baseUrl}/dashboard/chat.html?capsule=alpha&chat=page`);
    await page.fill('#text', `#sim {"chunks":${CHUNKS}}`);
    await page.click('#send button[type=submit]');
    await page.waitForFunction(() => {
      const text = document.querySelector('.msg.assistant')?.textContent ?? '';
      return text.includes('chunk 3 ') && !text.includes('chunk 40');
    });
    await page.reload();
    await page.waitForFunction(
      (n) => document.querySelector('.msg.assistant')?.textContent?.includes(`chunk ${n}`),
      CHUNKS,
    );
    const shown = await page.$$eval('.msg', (els) => els.map((e) => [e.className, e.textContent]));
    expect(shown).toEqual([
      ['msg user', `#sim {"chunks":${CHUNKS}}`],
      ['msg assistant', Array.from({ length: CHUNKS }, (_, i) => `chunk ${i + 1}`).join(' ')],
    ]);
    await page.close();
  });
});
