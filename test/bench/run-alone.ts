/**
 * A bench file run on its own (`npx tsx test/bench/streams.ts`) rather than through run.ts: its
 * figures' summary table, and on a failure its pinned processes stopped before it exits.
 */
import { pathToFileURL } from 'node:url';
import { killAll } from './fanout-procs.js';
import { printSummary, type Figure } from './scale-summary.js';

/** Runs `bench` when `moduleUrl` (the caller's `import.meta.url`) is the file node was started with. */
export const runAlone = (moduleUrl: string, bench: () => Promise<Figure[]>): void => {
  if (!process.argv[1] || moduleUrl !== pathToFileURL(process.argv[1]).href) return;
  bench().then(
    (figures) => {
      printSummary(figures);
      process.exit(0);
    },
    async (err: unknown) => {
      console.error(err);
      await killAll();
      process.exit(1);
    },
  );
};
