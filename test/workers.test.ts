/**
 * `--workers 2`: one command, two worker processes on one port, each a full replica on the shared
 * Redis. Both really accept connections (the host's `/metrics`, labelled per worker, counts each
 * worker's open streams); a worker SIGKILLed is started again and the log misses nothing the
 * capsule wrote; SIGTERM drains every worker and the command exits 0. Without Redis more than one
 * worker is refused with one line.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { startSimulator, type SimulatedCapsule } from '../src/simulator/index.js';
import { loggedFrames } from './client/log-frames.js';
import { testRedisUrl, uniqueCapsule } from './support/redis.js';
import { freePort } from './support/redis-server.js';
import { RedisStore } from '../src/log/redis-store.js';
import { TEST_READER_TIMEOUT_MS } from './support/deadlines.js';

const redisUrl = testRedisUrl();
const CLI = ['--import', 'tsx', 'src/cli.ts'];

let child: ChildProcess | null = null;
let sim: SimulatedCapsule | null = null;
let output = '';
afterEach(async () => {
  if (child && child.exitCode === null) {
    child.kill('SIGKILL');
    await once(child, 'exit');
  }
  await sim?.stop();
  child = null;
  sim = null;
  output = '';
});

const run = (args: string[]): ChildProcess => {
  const c = spawn(process.execPath, [...CLI, ...args], { stdio: 'pipe' });
  c.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  c.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  return c;
};

const waitFor = async (test: () => boolean, what: string): Promise<void> => {
  await expect.poll(test, { timeout: 30_000, interval: 20, message: `${what}\n${output}` }).toBe(true);
};

/** The host's open native streams per worker, from one scrape. */
const streamsPerWorker = async (base: string): Promise<Record<string, number>> => {
  const text = await (await fetch(`${base}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(
    /^murmur_gateway_open_connections\{worker="(\d+)",[^}]*surface="murmur"\} (\d+)/gm,
  ))
    out[m[1]!] = (out[m[1]!] ?? 0) + Number(m[2]);
  return out;
};

describe.skipIf(!redisUrl)('--workers', () => {
  it('two workers on one port both serve; a killed one comes back and nothing is lost; SIGTERM drains all', async () => {
    // The 0.4 line replays exactly what a reconnect missed (id-0 frames too): a failover loses nothing.
    sim = await startSimulator({ heartbeatMs: 200, taskAcceptance: 'queue', release: '0.4' });
    const port = await freePort();
    const capsule = uniqueCapsule('wk');
    child = run([
      '--workers',
      '2',
      '--redis',
      redisUrl!,
      '--capsule',
      `${capsule}=${sim.url}`,
      '--port',
      String(port),
    ]);
    await waitFor(() => output.includes('murmur-gateway listening on'), 'the banner');
    expect(output).toContain(`murmur-gateway listening on http://127.0.0.1:${port} (`);
    expect(output).toContain('; 2 workers)');
    const base = `http://127.0.0.1:${port}`;

    // Streams opened one after another land on both workers (the cluster hands them out in turn).
    const streams = Array.from({ length: 8 }, () => new AbortController());
    await Promise.all(streams.map((s) => fetch(`${base}/murmur/${capsule}/events`, { signal: s.signal })));
    const per = await streamsPerWorker(base);
    expect(Object.keys(per).sort()).toEqual(['0', '1']);
    expect(per['0']! + per['1']!).toBe(8);
    expect(per['0']).toBeGreaterThan(0);
    expect(per['1']).toBeGreaterThan(0);
    for (const s of streams) s.abort();

    // The worker that ingests the capsule dies hard while the capsule works: it is started again, the
    // other takes the capsule over, nothing is lost. (A replica's id ends with its pid.)
    // The lease is taken by one worker (it may still be settling right after start).
    let workerPid = 0;
    await expect
      .poll(
        async () => {
          const status = (await (await fetch(`${base}/capsules`)).json()) as {
            capsules: { owner: string | null }[];
          };
          workerPid = Number(/-(\d+)$/.exec(status.capsules[0]?.owner ?? '')?.[1] ?? 0);
          return workerPid;
        },
        { timeout: 30_000, interval: 50 },
      )
      .toBeGreaterThan(0);
    expect(workerPid).not.toBe(child.pid);
    const work = (async () => {
      for (let i = 0; i < 6; i++) await sim!.submit(`#sim {"chunks":20,"delayMs":10}`).done;
    })();
    process.kill(workerPid, 'SIGKILL');
    await waitFor(() => output.includes('worker died: starting it again'), 'the restart');
    await work;
    const last = sim.written[sim.written.length - 1]!;
    const reader = new RedisStore(redisUrl!, { commandTimeoutMs: TEST_READER_TIMEOUT_MS });
    try {
      await expect
        .poll(async () => (await loggedFrames(reader as never, capsule)).some((f) => f.data === last.data), {
          timeout: 30_000,
          interval: 50,
        })
        .toBe(true);
      const logged = (await loggedFrames(reader as never, capsule)).map((f) => f.data);
      // Every frame the capsule wrote is in the log, in order (id-0 frames a cold attach could miss
      // are not at stake: the capsule was watched from its first frame).
      expect(logged).toEqual(sim.written.map((w) => w.data));
    } finally {
      await reader.close();
    }

    // The restarted worker serves (a worker still starting has no drain to log).
    await waitFor(
      () => (output.match(/"msg":"worker listening"/g)?.length ?? 0) === 3,
      'the restarted worker',
    );
    child.kill('SIGTERM');
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(0);
    expect(output).toContain('"msg":"draining every worker"');
    expect(output.match(/"msg":"drained"/g)?.length).toBe(3);
  }, 90_000);

  it('more than one worker without Redis, or a count that is not one, is refused with one line', async () => {
    child = run(['--workers', '2', '--port', '0']);
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(2);
    expect(output).toBe(
      "murmur-gateway: invalid configuration: --workers 2 needs Redis (--redis URL): workers share the log, and the embedded store is one process's memory\n",
    );
    output = '';
    child = run(['--workers', 'nine']);
    const [bad] = (await once(child, 'exit')) as [number];
    expect(bad).toBe(2);
    expect(output).toBe('murmur-gateway: invalid configuration (--workers): "nine" is not a number\n');
  });
});
