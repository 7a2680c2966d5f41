/**
 * A bench's results as JSON beside its tables: every run's samples, their medians, the summary
 * rows, the command and the machine, for comparing a quiet machine's run with a busy one's without
 * copying tables by hand. Written to BENCH_JSON_DIR, else `.tmp/bench/` in the repository (ignored
 * by git), as `<bench>-<UTC time>.json`; the path is printed.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { REPO } from './gateway-build.js';

export const writeBenchJson = (bench: string, results: Record<string, unknown>): string => {
  const dir = process.env.BENCH_JSON_DIR ?? join(REPO, '.tmp', 'bench');
  mkdirSync(dir, { recursive: true });
  const at = new Date().toISOString();
  const file = join(dir, `${bench}-${at.replace(/[:.]/g, '-')}.json`);
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('BENCH_')));
  const machine = {
    cores: cpus().length,
    model: cpus()[0]?.model ?? '?',
    node: process.version,
    loadAverageAtEnd: loadavg(),
  };
  writeFileSync(file, `${JSON.stringify({ bench, at, env, machine, ...results }, null, 2)}\n`);
  console.log(`results as JSON: ${file}`);
  return file;
};
