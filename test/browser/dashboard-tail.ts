/** What both dashboard tests check of the live tail: it shows rows, and then a newer one on top. */
import type { Page } from 'playwright-core';

/** Page-side globals (these callbacks run in Chromium; the project's lib has no DOM). */
declare const document: {
  querySelector(s: string): { getAttribute(n: string): string | null } | null;
};

export const waitForTailToMove = async (page: Page): Promise<void> => {
  await page.waitForSelector('#tail tbody tr[data-offset]', { timeout: 20_000 });
  const top = Number(await page.$eval('#tail tbody tr[data-offset]', (tr) => tr.getAttribute('data-offset')));
  await page.waitForFunction(
    (t) => Number(document.querySelector('#tail tbody tr[data-offset]')?.getAttribute('data-offset')) > t,
    top,
    { timeout: 20_000 },
  );
};
