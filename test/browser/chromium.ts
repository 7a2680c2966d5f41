/**
 * Debian's Chromium, headless, driven by playwright-core (which never downloads a browser). Absent
 * Chromium skips the browser tests with a notice, unless REQUIRE_BROWSER=1 (CI) makes it a failure.
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

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
