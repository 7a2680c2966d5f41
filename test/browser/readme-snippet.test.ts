/**
 * The README's browser snippet, as written, in Chromium: a page served from another loopback port
 * (another origin) imports the client module from a demo gateway and logs records. The demo's CORS
 * (loopback origins only, src/process.ts) is what lets it; the page's console is what the README
 * promises.
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoGateway, type DemoGateway } from '../support/demo-gateway.js';
import { chromiumForFile, hasBrowser } from './chromium.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const snippet = (): string => {
  const blocks = [...readme.matchAll(/```html\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const block = blocks.find((b) => b.includes('followCapsule'));
  if (!block) throw new Error('README has no html block with followCapsule');
  return block;
};

let running: DemoGateway | null = null;
let pages: Server | null = null;

describe.skipIf(!hasBrowser)("the README's browser snippet against the demo", () => {
  const browser = chromiumForFile();
  beforeAll(async () => {
    running = await startDemoGateway();
  }, 60_000);
  afterAll(async () => {
    await new Promise((r) => (pages ? pages.close(r) : r(undefined)));
    await running?.close();
  });

  it('a page on another loopback port logs the capsule records, offsets first', async () => {
    const gwPort = new URL(running!.gw.baseUrl).port;
    const html = `<!doctype html><title>snippet</title>\n${snippet().replaceAll('localhost:8080', `localhost:${gwPort}`)}`;
    pages = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end(html);
    });
    await new Promise<void>((r) => pages!.listen(0, '127.0.0.1', r));
    const pagePort = (pages.address() as AddressInfo).port;

    const page = await browser().newPage();
    const logged: { offset: number; record: { offset?: number } }[] = [];
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (msg) => {
      if (msg.type() === 'error') errors.push(msg.text());
      void Promise.all(msg.args().map((a) => a.jsonValue())).then(
        (args: unknown[]) => {
          if (typeof args[0] === 'number')
            logged.push({ offset: args[0], record: args[1] as { offset?: number } });
        },
        // The page closed while its last lines were read: nothing more to take.
        () => undefined,
      );
    });
    let enough!: () => void;
    const five = new Promise<void>((r) => (enough = r));
    // Five records, or the first error (a refused module or stream), whichever comes first.
    const poll = setInterval(() => (logged.length >= 5 || errors.length > 0) && enough(), 20);
    await page.goto(`http://localhost:${pagePort}/`);
    await five;
    clearInterval(poll);
    await page.close();
    expect(errors).toEqual([]);
    const offsets = logged.map((l) => l.offset);
    expect(offsets).toEqual([...offsets].sort((a, b) => a - b));
    for (const l of logged) expect(l.record.offset).toBe(l.offset);
  });
});
