/**
 * The README's own commands, as a newcomer types them (ports moved to free ones, Redis to the
 * suite's): `npm run demo`, `npm start -- --capsule … --redis …` (the built launcher, as `npx murmur-gateway` is where the
 * package is installed) and `npm run simulate`.
 * Each runs as its own process and must answer on its port as the README says. `npm test` and
 * `npm install` are what .ci/run runs; `docker compose up` needs a Docker engine these machines lack.
 * The Benchmarks table's commands take minutes each and want the machine to themselves, so here
 * each runs with `--check`: its selectors and environment are the bench's own, named as it would run.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { freePort } from '../support/redis-server.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const root = new URL('../..', import.meta.url).pathname;

/** The README line that starts with `prefix`, inside a bash block. */
const commandOf = (prefix: string): string => {
  const blocks = [...readme.matchAll(/```bash\n([\s\S]*?)```/g)].flatMap((m) => m[1]!.split('\n'));
  const line = blocks.find((l) => l.startsWith(prefix));
  if (!line) throw new Error(`README has no command starting with "${prefix}"`);
  return line;
};

const running: ChildProcess[] = [];
afterEach(() => {
  // Each command's whole process group (npm starts node as a child).
  for (const p of running.splice(0)) if (p.pid) process.kill(-p.pid, 'SIGTERM');
});

const start = (command: string): ChildProcess => {
  const child = spawn('bash', ['-c', `exec ${command}`], { cwd: root, stdio: 'ignore', detached: true });
  running.push(child);
  return child;
};

/** Poll `url` until `ok(body)` (a process starting up), bounded. */
const until = async (url: string, ok: (body: string) => boolean, timeoutMs = 45_000): Promise<string> => {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) });
      last = await res.text();
      if (res.ok && ok(last)) return last;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${url} never answered as expected; last answer: ${last.slice(0, 300)}`);
};

describe('README commands', () => {
  it('npm run demo serves a mixed fleet, one capsule per release line, all connected', async () => {
    const port = await freePort();
    expect(commandOf('npm install && npm run demo')).toBe('npm install && npm run demo');
    // The README's hint for a taken 8080, as written but for the port.
    const portHint = /`(npm run demo -- --port 8081)`/.exec(readme)?.[1];
    expect(portHint).toBe('npm run demo -- --port 8081');
    start(portHint!.replace('8081', String(port)));
    // Connected and working: a frame past the connection's own fact (the replay's fate is decided).
    const body = await until(`http://127.0.0.1:${port}/capsules`, (b) =>
      (JSON.parse(b) as { capsules: { upstream: string; last_frame_at: string | null }[] }).capsules.every(
        (c) => c.upstream === 'connected' && c.last_frame_at !== null,
      ),
    );
    const capsules = (
      JSON.parse(body) as { capsules: { id: string; release: string; frames_possibly_missing: number }[] }
    ).capsules;
    // A fresh demo shows no loss that did not happen.
    expect(capsules.map((c) => c.frames_possibly_missing)).toEqual([0, 0, 0, 0, 0, 0]);
    // Its root is the dashboard.
    const root = await fetch(`http://127.0.0.1:${port}/`);
    expect(root.url).toBe(`http://127.0.0.1:${port}/dashboard/`);
    expect(capsules.map((c) => [c.id, c.release])).toEqual([
      ['demo-alpha', 'spec'],
      ['demo-beta', 'spec'],
      ['demo-v04', '0.4'],
      ['demo-v05', '0.5'],
      ['demo-v06', '0.6'],
      ['demo-v10', '1.0'],
    ]);
  }, 60_000);

  it('npm run demo -- --help lists every flag, as the README says', () => {
    const hint = /`(npm run demo -- --help)`/.exec(readme)?.[1];
    expect(hint).toBe('npm run demo -- --help');
    const run = spawnSync('bash', ['-c', hint!], { cwd: root, encoding: 'utf8', timeout: 60_000 });
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('--port N                   PORT                         8080');
    expect(run.stdout).toContain('--log-format FORMAT');
  }, 60_000);

  it('the simulator and one capsule with Redis, as "Running it for real" says', async () => {
    const redisUrl = inject('redisUrl');
    if (!redisUrl) return; // no redis-server: the suite's global setup says so (REQUIRE_REDIS fails there)
    const [simPort, gwPort] = [await freePort(), await freePort()];
    const simulateCmd = commandOf('npm run simulate').replace('52222', String(simPort));
    expect(simulateCmd).toMatch(/^npm run simulate -- --port \d+ --workload$/);
    start(simulateCmd);
    await until(`http://127.0.0.1:${simPort}/.well-known/agent-card.json`, (b) => b.includes('session'));
    const gateway = commandOf('npm start -- --capsule')
      .replace('52222', String(simPort))
      .replace('redis://127.0.0.1:6379', redisUrl);
    start(`${gateway} --port ${gwPort}`);
    const body = await until(`http://127.0.0.1:${gwPort}/capsules`, (b) =>
      b.includes('"upstream":"connected"'),
    );
    const [alpha] = (JSON.parse(body) as { capsules: { id: string; head_offset: number }[] }).capsules;
    expect(alpha!.id).toBe('alpha');
    // The workload writes: the log grows.
    await until(`http://127.0.0.1:${gwPort}/murmur/alpha/poll?after=0&limit=50`, (b) =>
      b.includes('"kind":"frame"'),
    );
  }, 90_000);

  it('every bench command of the Benchmarks table names benches that exist', () => {
    const commands = [
      ...new Set([...readme.matchAll(/`((?:[A-Z_]+=\S+ )*npm run bench(?: -- [^`]+)?)`/g)].map((m) => m[1]!)),
    ];
    expect(commands.length).toBeGreaterThanOrEqual(8);
    for (const command of commands) {
      const selectors = command.split(' -- ')[1]?.split(' ') ?? [];
      const run = spawnSync('bash', ['-c', `${command}${selectors.length ? '' : ' --'} --check`], {
        cwd: root,
        encoding: 'utf8',
        timeout: 30_000,
      });
      expect(run.status, `${command}: ${run.stderr}`).toBe(0);
      const named = /would run: (.*)/.exec(run.stdout)?.[1]?.split(', ') ?? [];
      for (const s of selectors) expect(named, command).toContain(s);
    }
  }, 120_000);
});
