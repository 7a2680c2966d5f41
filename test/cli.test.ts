/**
 * The CLI as a user runs it: a real child process. Bad configuration stops it with exit 2 and one
 * message naming the field; SIGTERM drains and exits 0.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
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

describe('murmur-gateway CLI', () => {
  let sim: SimulatedCapsule | null = null;
  afterEach(async () => {
    await sim?.stop();
    sim = null;
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
      `host: 127.0.0.1\nport: ${port}\nlogLevel: debug\ncapsules:\n  - id: alpha\n    url: ${sim.url}\n    doorToken: door-s3cret\n`,
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
