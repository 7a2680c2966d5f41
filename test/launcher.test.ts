/**
 * The launcher (src/bin/murmur-gateway, the package's bin and `npm start`): confined to one core it
 * starts node with --no-concurrent-marking, with more it leaves V8's concurrent marker on; the env
 * overrides force either way (anything else stops it) and GATEWAY_NODE_FLAGS adds flags; whatever the
 * CPUs it sets MALLOC_ARENA_MAX=2 unless the environment sets it. Run against a stand-in cli.js in a
 * copy of the dist layout (bin/ beside src/) that prints the node flags it was started with, its
 * arguments and MALLOC_ARENA_MAX as it got it.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const dist = mkdtempSync(join(tmpdir(), 'mg-launcher-'));
mkdirSync(join(dist, 'bin'));
mkdirSync(join(dist, 'src'));
const launcher = join(dist, 'bin', 'murmur-gateway');
copyFileSync('src/bin/murmur-gateway', launcher);
writeFileSync(
  join(dist, 'src', 'cli.js'),
  'console.log(JSON.stringify({ flags: process.execArgv, args: process.argv.slice(2), ' +
    'arenas: process.env.MALLOC_ARENA_MAX ?? null }));\n',
);

interface Launched {
  flags: string[];
  args: string[];
  arenas: string | null;
}

const launch = (env: Record<string, string> = {}, pinned = false): Launched => {
  const [cmd, args] = pinned ? ['taskset', ['-c', '0', 'sh', launcher]] : ['sh', [launcher]];
  const out = execFileSync(cmd, [...args, '--port', '1'], {
    env: { PATH: process.env.PATH, NODE: process.execPath, ...env },
    encoding: 'utf8',
  });
  return JSON.parse(out) as Launched;
};

describe('launcher', () => {
  afterAll(() => rmSync(dist, { recursive: true, force: true }));

  it('starts node with --no-concurrent-marking when confined to one core, passing the arguments on', () => {
    expect(launch({}, true)).toMatchObject({ flags: ['--no-concurrent-marking'], args: ['--port', '1'] });
  });

  it.runIf(availableParallelism() > 1)('leaves the concurrent marker on with more than one core', () => {
    expect(launch().flags).toEqual([]);
  });

  it('follows GATEWAY_CONCURRENT_MARKING either way and adds GATEWAY_NODE_FLAGS', () => {
    expect(launch({ GATEWAY_CONCURRENT_MARKING: 'on' }, true).flags).toEqual([]);
    expect(launch({ GATEWAY_CONCURRENT_MARKING: 'off' }).flags).toEqual(['--no-concurrent-marking']);
    expect(
      launch(
        { GATEWAY_CONCURRENT_MARKING: 'off', GATEWAY_NODE_FLAGS: '--max-old-space-size=512 --no-warnings' },
        true,
      ).flags,
    ).toEqual(['--no-concurrent-marking', '--max-old-space-size=512', '--no-warnings']);
  });

  it('sets MALLOC_ARENA_MAX=2 for node unless the environment sets it', () => {
    expect(launch().arenas).toBe('2');
    expect(launch({}, true).arenas).toBe('2');
    expect(launch({ MALLOC_ARENA_MAX: '8' }).arenas).toBe('8');
  });

  it('refuses any other GATEWAY_CONCURRENT_MARKING with exit 2, starting nothing', () => {
    const out = spawnSync('sh', [launcher], {
      env: { PATH: process.env.PATH, NODE: process.execPath, GATEWAY_CONCURRENT_MARKING: 'yes' },
      encoding: 'utf8',
    });
    expect(out.status).toBe(2);
    expect(out.stdout).toBe('');
    expect(out.stderr).toBe(
      "murmur-gateway: GATEWAY_CONCURRENT_MARKING must be on, off or auto, not 'yes'\n",
    );
  });
});
