/**
 * Fleet test rig: gateway replicas as child processes (test/soak/gateway-process.ts) on one Redis
 * (a URL, or `{cluster: [...]}` for a Redis Cluster), each with its own replica id and lease timing
 * (a config file), and their public /capsules view.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RedisConfig } from '../../src/config/schema.js';
import { gatewayProcess, type GatewayProcess } from '../soak/gateway-process.js';
import { scaled } from '../support/deadlines.js';
import type { SimulatedCapsule } from '../../src/simulator/index.js';
import type { LogStore } from '../../src/log/store.js';
import { freePort } from '../support/redis-server.js';
import { isFinalStatusOf, readAll } from '../upstream/log-vs-written.js';

export interface CapsuleRow {
  id: string;
  upstream: string;
  upstream_reason: string | null;
  head_offset: number;
  owner: string | null;
  fencing_token: number;
}

export interface CapsulesView {
  replica: string;
  capsules: CapsuleRow[];
}

export interface Replica {
  readonly id: string;
  readonly proc: GatewayProcess;
  readonly url: string;
  view(): Promise<CapsulesView>;
  /** This replica's row for `capsule`. */
  row(capsule: string): Promise<CapsuleRow>;
}

const dir = mkdtempSync(join(tmpdir(), 'mg-fleet-'));

export const replica = async (
  id: string,
  redis: RedisConfig,
  capsules: { id: string; url: string }[],
  lease?: { ttlMs: number; renewMs: number },
  extra: Record<string, unknown> = {},
): Promise<Replica> => {
  const file = join(dir, `${id}.json`);
  // A URL goes on the command line as a user would give it; Sentinel and Cluster only in the file.
  const config = { fleet: { replicaId: id, ...(lease ? { lease } : {}) }, logLevel: 'info', ...extra };
  writeFileSync(file, JSON.stringify(typeof redis === 'string' ? config : { ...config, store: { redis } }));
  const args = ['--config', file, ...(typeof redis === 'string' ? ['--redis', redis] : [])];
  for (const c of capsules) args.push('--capsule', `${c.id}=${c.url}`);
  const proc = gatewayProcess(await freePort(), args);
  const view = async (): Promise<CapsulesView> => {
    const res = await fetch(`${proc.url}/capsules`, { signal: AbortSignal.timeout(scaled(3000)) });
    return (await res.json()) as CapsulesView;
  };
  return {
    id,
    proc,
    url: proc.url,
    view,
    row: async (capsule) => {
      const row = (await view()).capsules.find((c) => c.id === capsule);
      if (!row) throw new Error(`${capsule} missing from ${id}'s /capsules`);
      return row;
    },
  };
};

/** Poll `probe` (every 50 ms, bounded, scaled to the load) until it returns a value; the error names what was awaited. */
export const until = async <T>(
  what: string,
  probe: () => Promise<T | null | undefined | false>,
  timeoutMs = 20_000,
): Promise<T> => {
  const deadline = Date.now() + scaled(timeoutMs);
  let last: unknown = null;
  while (Date.now() < deadline) {
    try {
      const v = await probe();
      if (v !== null && v !== undefined && v !== false) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}${last ? ` (last error: ${String(last)})` : ''}`);
};

/**
 * Once the capsule is idle, run a last task and wait until its final status is in the log: then
 * everything the capsule wrote before it has been logged, by whichever replica owns it now.
 */
export const untilSentinelLogged = async (
  sim: SimulatedCapsule,
  store: LogStore,
  capsule: string,
): Promise<void> => {
  await sim.idle();
  const last = sim.submit('sentinel');
  await last.done;
  await until('the last frame logged', async () =>
    (await readAll(store, capsule)).some((r) => isFinalStatusOf(r, last.taskId)),
  );
};

export const ownersOf = async (r: Replica): Promise<Map<string, string | null>> =>
  new Map((await r.view()).capsules.map((c) => [c.id, c.owner]));
