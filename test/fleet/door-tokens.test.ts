/**
 * Door tokens that rotate (0.5+ mints a new one at every capsule restart, docs/release-lines.md "Door
 * tokens"). With the token in the config file, the refused capsule shows `unauthorized` in /capsules
 * and the metric, retries with a growing backoff (the door counts the refusals), and takes the new
 * token on SIGHUP; with discovery, a refusal re-reads the running records at once and the rewritten
 * record brings the capsule back. Either way the log equals what the capsule wrote, across both
 * sessions, and no token appears in logs or downstream.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { LogRecord } from '../../src/log/record.js';
import { processStartMs } from '../../src/fleet/process-start.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { freePort } from '../support/redis-server.js';
import { compareLog, readAll } from '../upstream/log-vs-written.js';
import { scaled } from '../support/deadlines.js';

const CLI = ['--import', 'tsx', 'src/cli.ts'];
const SCRIPT = '#sim {"chunks":6,"tools":1,"turns":2}';

const until = async (check: () => Promise<boolean> | boolean, what: string, ms = 20_000): Promise<void> => {
  const deadline = Date.now() + scaled(ms);
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${scaled(ms)} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
};

interface CapsuleView {
  id: string;
  upstream: string;
  upstream_reason: string | null;
  session_id: string | null;
  release: string;
}

const capsulesOf = async (base: string): Promise<{ body: string; list: CapsuleView[] }> => {
  const res = await fetch(`${base}/capsules`);
  const body = await res.text();
  return { body, list: (JSON.parse(body) as { capsules: CapsuleView[] }).capsules };
};
const capsuleView = async (base: string, id: string): Promise<CapsuleView | undefined> =>
  (await capsulesOf(base)).list.find((c) => c.id === id);

/** The native long-poll's records, in the store's shape (what compareLog reads). */
const pollAll = async (base: string, capsule: string): Promise<LogRecord[]> => {
  const out: LogRecord[] = [];
  for (let after = 0, pages = 0; pages < 1000; pages++) {
    const res = await fetch(`${base}/murmur/${capsule}/poll?after=${after}&limit=1000`);
    const page = (await res.json()) as { records: Record<string, unknown>[]; next_cursor: number };
    if (page.records.length === 0) break;
    for (const r of page.records) {
      out.push((r.kind === 'frame' ? { ...r, upstreamId: r.id } : r) as unknown as LogRecord);
    }
    after = page.next_cursor;
  }
  return out;
};

let sim: SimulatedCapsule | undefined;
let child: ChildProcess | undefined;
let gw: TestGateway | undefined;
const dirs: string[] = [];
afterEach(async () => {
  child?.kill('SIGKILL');
  child = undefined;
  await gw?.close();
  gw = undefined;
  await sim?.stop();
  sim = undefined;
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('door tokens that rotate', () => {
  it('config token: unauthorized after the capsule restarts, a bounded retry, the new token on SIGHUP', async () => {
    const first = 'mdt_first_0123456789abcdef0123';
    sim = await startSimulator({ release: '0.5', doorToken: first, taskAcceptance: 'queue' });
    const s = sim;
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const dir = mkdtempSync(join(tmpdir(), 'mg-door-'));
    dirs.push(dir);
    const file = join(dir, 'gateway.yaml');
    const writeConfig = (token: string): void =>
      writeFileSync(
        file,
        `server: {host: 127.0.0.1, port: ${port}}\nlogLevel: debug\ncapsules:\n  - id: alpha\n    url: ${s.url}\n    doorToken: ${token}\n`,
      );
    writeConfig(first);
    child = spawn(process.execPath, [...CLI, '--config', file], { stdio: 'pipe' });
    let out = '';
    child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
    await until(() => out.includes('"to":"connected"'), 'the gateway connected');

    await s.submit(SCRIPT).done;
    // Logged before the restart: a frame the old session wrote but never delivered is gone with it.
    await until(
      async () => (await pollAll(base, 'alpha')).filter((r) => r.kind === 'frame').length >= s.written.length,
      'the first task logged',
    );

    // The restart mints a new token: the one in the file goes stale.
    const refusals: number[] = [];
    s.on('refused', () => refusals.push(Date.now()));
    await s.restart();
    const second = s.doorToken!;
    expect(second).not.toBe(first);
    await until(
      async () => (await capsuleView(base, 'alpha'))?.upstream_reason === 'unauthorized',
      '/capsules says unauthorized',
    );
    expect(await capsuleView(base, 'alpha')).toMatchObject({ upstream: 'backoff' });
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toContain('murmur_gateway_upstream_unauthorized{capsule="alpha"} 1');
    // Let a few retries happen, then bound them by the time they took: a doubling backoff from
    // 250 ms makes at most about log2(elapsed / 250) + 2 attempts, never one per event-loop turn;
    // each attempt is two refused requests (the extended card for the session id, then the watch).
    await until(() => refusals.length >= 6, 'three refused attempts');
    const elapsed = Date.now() - refusals[0]!;
    expect(refusals.length).toBeLessThanOrEqual(2 * (Math.ceil(Math.log2(elapsed / 250 + 1)) + 2));

    writeConfig(second);
    child.kill('SIGHUP');
    await until(async () => (await capsuleView(base, 'alpha'))?.upstream === 'connected', 'connected again');
    expect(out).toContain('SIGHUP: capsules reloaded');
    await s.submit(SCRIPT).done;
    await until(
      async () => (await pollAll(base, 'alpha')).filter((r) => r.kind === 'frame').length >= s.written.length,
      'the second task logged',
    );

    const records = await pollAll(base, 'alpha');
    expect(compareLog(records, s.written).problems).toEqual([]);
    expect(records.some((r) => r.kind === 'fact' && r.fact === 'capsule-session-started')).toBe(true);
    const { body } = await capsulesOf(base);
    for (const token of [first, second]) {
      expect(out).not.toContain(token);
      expect(body).not.toContain(token);
      expect(JSON.stringify(records)).not.toContain(token);
    }
  });

  it('discovered token: a refusal re-reads the running records; the rewritten record brings it back', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mg-running-'));
    dirs.push(dir);
    sim = await startSimulator({
      release: '0.6',
      doorToken: 'mdt_initial_token_00112233',
      taskAcceptance: 'queue',
    });
    const s = sim;
    const start = await processStartMs(process.pid);
    const record = (): string => {
      const file = join(dir, `${s.sessionId}.json`);
      writeFileSync(
        file,
        JSON.stringify({
          session_id: s.sessionId,
          url: s.url.replace(/^http:\/\/|\/$/g, ''),
          pid: process.pid,
          process_start: new Date(start!.ms).toISOString(),
          capsule_name: 'rotating',
          capsule_version: '0.6.0',
          workdir: '/tmp',
          outlives_launcher: false,
          started_at: new Date().toISOString(),
          door_token: s.doorToken,
        }),
        { mode: 0o600 },
      );
      return file;
    };
    const tokens = [s.doorToken!];
    const firstRecord = record();
    // The periodic rescan is far away: only the directory watch and a refusal make the gateway look.
    gw = await startTestGateway({
      capsules: {},
      extra: { fleet: { discoverRunning: dir } },
      tuning: {
        fleet: { discoveryRescanMs: 600_000 },
        upstream: { backoffBaseMs: 100, backoffCapMs: 1_000 },
      },
    });
    const base = gw.baseUrl;
    await until(async () => (await capsuleView(base, 'rotating'))?.upstream === 'connected', 'discovered');
    await s.submit(SCRIPT).done;
    await until(
      async () =>
        (await readAll(gw!.gateway.store, 'rotating')).filter((r) => r.kind === 'frame').length >=
        s.written.length,
      'the first task logged',
    );

    // The record on disk is unchanged, so nothing but the door's refusal can tell the gateway.
    await s.restart();
    tokens.push(s.doorToken!);
    await until(async () => (await capsuleView(base, 'rotating')) === undefined, 'the stale record dropped');

    unlinkSync(firstRecord);
    record();
    await until(async () => {
      const v = await capsuleView(base, 'rotating');
      return v?.upstream === 'connected' && v.session_id === s.sessionId;
    }, 'back on the new session');
    await s.submit(SCRIPT).done;
    await until(
      async () =>
        (await readAll(gw!.gateway.store, 'rotating')).filter((r) => r.kind === 'frame').length >=
        s.written.length,
      'the second task logged',
    );
    const records = await readAll(gw.gateway.store, 'rotating');
    expect(compareLog(records, s.written).problems).toEqual([]);
    // Only the restart's own flag (what the old session wrote after the last frame seen is unknowable).
    expect(
      records.flatMap((r) => (r.kind === 'fact' && r.fact === 'frames-possibly-missing' ? [r.reason] : [])),
    ).toEqual(['capsule-restarted']);
    const { body } = await capsulesOf(base);
    for (const token of tokens) {
      expect(body).not.toContain(token);
      expect(JSON.stringify(records)).not.toContain(token);
    }
  });
});
