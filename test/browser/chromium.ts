/**
 * Debian's Chromium, headless, driven by playwright-core (which never downloads a browser). Absent
 * Chromium skips the browser tests with a notice, unless REQUIRE_BROWSER=1 (CI) makes it a failure.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll } from 'vitest';

const CANDIDATES = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'];

export const chromiumPath: string | null = CANDIDATES.find((p): p is string => !!p && existsSync(p)) ?? null;

if (!chromiumPath) {
  if (process.env.REQUIRE_BROWSER === '1')
    throw new Error(
      'REQUIRE_BROWSER=1 but no Chromium found (apt-get install chromium, or set CHROMIUM_PATH)',
    );
  console.warn('browser tests skipped: no Chromium (apt-get install chromium, or set CHROMIUM_PATH)');
}

/** `describe.skipIf(!hasBrowser)` */
export const hasBrowser = chromiumPath !== null;

export const launchChromium = (): Promise<Browser> =>
  chromium.launch({
    executablePath: chromiumPath!,
    headless: true,
    // Root in CI containers: Chromium's sandbox needs user namespaces it may not have.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });

/** One Chromium, launched before the file's first test and closed after its last. */
export const chromiumForFile = (): (() => Browser) => {
  let browser: Browser | null = null;
  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
  });
  return () => {
    if (!browser) throw new Error('Chromium is launched in beforeAll: use it inside a test');
    return browser;
  };
};
