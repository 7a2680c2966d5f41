/**
 * The CLI as a user runs it: a real child process. Bad configuration stops it with exit 2 and one
 * message naming the field, and so does a port that is taken; SIGTERM drains and exits 0; `--help`
 * names every flag and variable, `--version` the package's; logs are pretty or JSON as asked.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { prettyLine } from '../src/logger.js';
import { startSimulator, type SimulatedCapsule } from '../src/simulator/index.js';
import { freePort } from './support/redis-server.js';

const CLI = ['--import', 'tsx', 'src/cli.ts'];

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

const runCli = (args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> =>
  new Promise((resolve) => {
    const child = spawn(process.execPath, [...CLI, ...args], {
      env: { ...process.env, ...env },
      stdio: 'pipe',
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });

/** Start the CLI and resolve once its output contains `ready` (or reject if it exits first). */
const startCli = (
  args: string[],
  ready: string,
  env: NodeJS.ProcessEnv = {},
): Promise<{ child: ReturnType<typeof spawn>; out: () => string; exited: Promise<number | null> }> => {
  const child = spawn(process.execPath, [...CLI, ...args], {
    env: { ...process.env, ...env },
    stdio: 'pipe',
  });
  let out = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const onData = (d: Buffer): void => {
      out += d.toString();
      if (out.includes(ready)) resolve({ child, out: () => out, exited });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    void exited.then((code) => reject(new Error(`exited early with ${code}: ${out}`)));
  });
};

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

describe('murmur-gateway CLI', () => {
  let sim: SimulatedCapsule | null = null;
  let holder: Server | null = null;
  afterEach(async () => {
    await sim?.stop();
    sim = null;
    await new Promise((r) => (holder ? holder.close(r) : r(undefined)));
    holder = null;
  });

  it('--help names every flag, environment variable and default, and exits 0', async () => {
    const run = await runCli(['--help']);
    expect(run.code).toBe(0);
    expect(run.stderr).toBe('');
    for (const flag of [
      '--port N',
      '--host H',
      '--redis URL',
      '--capsule ID=URL',
      '--config FILE',
      '--public-url URL',
      '--tls-cert FILE',
      '--tls-key FILE',
      '--discover-running [DIR]',
      '--demo',
      '--log-level LEVEL',
      '--log-format FORMAT',
      '--version',
      '-h, --help',
    ])
      expect(run.stdout).toContain(flag);
    for (const env of [
      'PORT',
      'HOST',
      'REDIS_URL',
      'REDIS_CLUSTER',
      'REDIS_SENTINELS',
      'REDIS_SENTINEL_NAME',
      'REDIS_PASSWORD',
      'REDIS_SENTINEL_PASSWORD',
      'CAPSULES',
      'MURMUR_DOOR_TOKEN_<ID>',
      'GATEWAY_CONFIG',
      'PUBLIC_URL',
      'TLS_CERT',
      'TLS_KEY',
      'LOG_LEVEL',
      'LOG_FORMAT',
      'REPLICA_ID',
      'GATEWAY_ADMIN_TOKEN',
      'GATEWAY_CONCURRENT_MARKING',
      'GATEWAY_NODE_FLAGS',
    ])
      expect(run.stdout).toContain(env);
    expect(run.stdout).toMatch(/--port N +PORT +8080/);
    expect(run.stdout).toMatch(/--log-format FORMAT +LOG_FORMAT +pretty on a terminal, else json/);
    // Every environment variable the configuration reads is in the help.
    const load = readFileSync(new URL('../src/config/load.ts', import.meta.url), 'utf8');
    for (const [, name] of load.matchAll(/env\.([A-Z_]+)/g)) expect(run.stdout).toContain(name!);
  });

  it('--version prints the package version and exits 0', async () => {
    const run = await runCli(['--version']);
    expect(run).toEqual({ code: 0, stdout: `murmur-gateway ${pkg.version}\n`, stderr: '' });
  });

  it('a taken port stops it with exit 2 and one line naming the port and --port', async () => {
    const port = await freePort();
    holder = createServer();
    await new Promise<void>((r) => holder!.listen(port, '127.0.0.1', r));
    const run = await runCli(['--port', String(port), '--host', '127.0.0.1']);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(
      `murmur-gateway: cannot listen on 127.0.0.1:${port}: the port is in use (another gateway or demo?); choose another with --port N\n`,
    );
  });

  it('rejects a bad --log-format and a bad --log-level with exit 2, naming them', async () => {
    const format = await runCli(['--log-format', 'xml']);
    expect(format.code).toBe(2);
    expect(format.stderr).toBe(
      'murmur-gateway: invalid configuration (--log-format): "xml" must be pretty or json\n',
    );
    const envFormat = await runCli([], { LOG_FORMAT: 'yaml' });
    expect(envFormat.code).toBe(2);
    expect(envFormat.stderr).toBe(
      'murmur-gateway: invalid configuration (LOG_FORMAT): "yaml" must be pretty or json\n',
    );
    const level = await runCli(['--log-level', 'loud']);
    expect(level.code).toBe(2);
    expect(level.stderr).toMatch(
      /^murmur-gateway: invalid configuration \(flags and environment\):\n {2}logLevel: /,
    );
    expect(level.stderr.trim().split('\n')).toHaveLength(2);
  });

  it('--log-format pretty writes one readable line per entry; --log-level warn hides info lines', async () => {
    sim = await startSimulator();
    const port = await freePort();
    const cli = await startCli(
      [
        '--port',
        String(port),
        '--capsule',
        `alpha=${sim.url}`,
        '--log-format',
        'pretty',
        '--log-level',
        'warn',
      ],
      // The banner is written once the gateway listens and its drain is armed: a signal sent the
      // moment it shows drains (exit 0), it does not kill.
      '  stop:',
    );
    cli.child.kill('SIGTERM');
    expect(await cli.exited, cli.out()).toBe(0);
    const lines = cli.out().split('\n');
    const logLines = lines.filter((l) => /^\d\d:\d\d:\d\d\.\d{3} [A-Z]+ /.test(l));
    expect(cli.out()).not.toContain('{"level"');
    expect(logLines).toEqual([
      expect.stringMatching(
        /^\d\d:\d\d:\d\d\.\d{3} WARN {2}no Redis configured: using the embedded in-memory store; nothing survives a restart$/,
      ),
    ]);
    // The banner names the dashboard and Durable Streams.
    expect(cli.out()).toContain(`  dashboard:        http://127.0.0.1:${port}/dashboard/`);
    expect(cli.out()).toContain(`/v1/stream/murmur/alpha?offset=-1&live=sse`);
  });

  it('a config file with old keys starts, and warns once per old key at start', async () => {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'mg-cli-old-'));
    const file = join(dir, 'old.yaml');
    writeFileSync(file, `host: 127.0.0.1\nheartbeatSeconds: 5\ndownstream: {heartbeatMs: 2000}\n`);
    const cli = await startCli(
      ['--config', file, '--port', String(port), '--log-format', 'pretty', '--log-level', 'warn'],
      '  stop:',
    );
    cli.child.kill('SIGTERM');
    expect(await cli.exited, cli.out()).toBe(0);
    const warnings = cli
      .out()
      .split('\n')
      .filter((l) => l.includes('deprecated'))
      .map((l) => l.replace(/^\d\d:\d\d:\d\d\.\d{3} WARN {2}/, ''));
    expect(warnings).toEqual([
      'config key "host" is deprecated: use "server.host"',
      'config key "heartbeatSeconds" is deprecated: use "downstream.heartbeatMs" (milliseconds; "heartbeatSeconds" was in seconds); both are given, so "downstream.heartbeatMs" is used and "heartbeatSeconds" ignored',
    ]);
  });

  it.skipIf(!existsSync('/usr/bin/script'))(
    'on a terminal the logs are pretty by default, coloured',
    async () => {
      // `script` gives the CLI a pseudo-terminal for stdout, as a person's shell does.
      const port = await freePort();
      const command = [process.execPath, ...CLI, '--port', String(port)].join(' ');
      const child = spawn('script', ['-qec', command, '/dev/null'], {
        stdio: 'pipe',
        detached: true,
        env: { ...process.env, NO_COLOR: '' },
      });
      let out = '';
      const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (d: Buffer) => {
          out += d.toString();
          if (out.includes('  stop:')) resolve();
        });
        void exited.then(() => reject(new Error(`exited early: ${out}`)));
      });
      process.kill(-child.pid!, 'SIGTERM');
      await exited;
      expect(out).not.toContain('{"level"');
      const esc = '\u001b';
      expect(out).toContain(
        `${esc}[33mWARN ${esc}[0m no Redis configured: using the embedded in-memory store`,
      );
      const plain = out.replaceAll(`${esc}[33m`, '').replaceAll(`${esc}[0m`, '');
      expect(plain).toMatch(/^\d\d:\d\d:\d\d\.\d{3} WARN {2}no Redis configured/m);
    },
  );

  it('the same entry as JSON and as a pretty line, an error with its stack below', () => {
    const json = JSON.stringify({
      level: 40,
      time: Date.UTC(2026, 0, 2, 3, 4, 5, 6),
      pid: 1,
      hostname: 'h',
      service: 'murmur-gateway',
      capsule: 'alpha',
      reason: 'socket hang up',
      err: { type: 'Error', message: 'boom', stack: 'Error: boom\n    at x' },
      msg: 'upstream lost',
    });
    expect(prettyLine(json)).toBe(
      '03:04:05.006 WARN  upstream lost capsule=alpha reason="socket hang up" err="boom"\n    Error: boom\n        at x\n',
    );
    expect(prettyLine('not json')).toBe('not json\n');
  });

  it('stops with exit 2 and one message naming the field for an invalid config file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mg-cli-'));
    const file = join(dir, 'bad.yaml');
    writeFileSync(file, 'capsules:\n  - id: alpha\n    url: not-a-url\n');
    const run = await runCli(['--config', file]);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe(
      `murmur-gateway: invalid configuration (${file}):\n  capsules[0].url: must be an http:// or https:// URL\n`,
    );
    expect(run.stdout).toBe('');
  });

  it('rejects an unknown flag and a malformed --capsule', async () => {
    const unknown = await runCli(['--prot', '1']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^murmur-gateway: Unknown option '--prot'/);
    const bad = await runCli(['--capsule', 'alpha']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe('murmur-gateway: invalid configuration (--capsule): "alpha" must be ID=URL\n');
  });

  it('serves, never logs the door token, and drains on SIGTERM with exit 0', async () => {
    sim = await startSimulator({ doorToken: 'door-s3cret' });
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'mg-cli-'));
    const file = join(dir, 'ok.yaml');
    writeFileSync(
      file,
      `server: {host: 127.0.0.1, port: ${port}}\nlogLevel: debug\ncapsules:\n  - id: alpha\n    url: ${sim.url}\n    doorToken: door-s3cret\n`,
    );
    const child = spawn(process.execPath, [...CLI, '--config', file], { stdio: 'pipe' });
    let out = '';
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    // Ready once the upstream state change to `connected` is logged (the door accepted the token).
    await new Promise<void>((resolve, reject) => {
      const onData = (d: Buffer): void => {
        out += d.toString();
        if (out.includes('"to":"connected"')) resolve();
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      void exited.then((code) => reject(new Error(`exited early with ${code}: ${out}`)));
    });
    const res = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(res.status).toBe(200);
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(out).toContain('"msg":"drained"');
    expect(out).not.toContain('door-s3cret');
  });
});
