/**
 * The partition tests' fleet (partitions.test.ts): Redis, a simulated 0.4 capsule and a spec-line
 * one, each writing a steady workload, two gateway replicas and a client, each in its own network
 * namespace (test/support/netns.ts), with short liveness settings so each cut is a few seconds. The
 * client is test/support/netns-client.ts, driven over its stdin/stdout.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NetnsLab, type LabProcess, type NetnsNode } from '../support/netns.js';
import { until } from './fleet-rig.js';

/** The fleet tests' bounded poll (its deadline scales with the machine's load). */
export { until };

export const CAPSULE = 'cap';
/** A spec-line capsule (no heartbeat check: silence there means busy), on a node of its own. */
export const SPEC_CAPSULE = 'spec';
const GATEWAY_PORT = 8080;

/** Short settings a test can wait through: every figure scales with them (docs/fleet.md). */
export const LIVENESS = {
  store: { commandTimeoutMs: 1000, probeMs: 250, unreachableAfterMs: 1000 },
  upstream: {
    keepAliveMs: 1000,
    connectTimeoutMs: 1000,
    heartbeatMs: 1000,
    heartbeatMisses: 3,
    giveUpAfterMs: 1500,
    giveUpCooldownMs: 60_000,
  },
  downstream: { heartbeatMs: 1000, keepAliveMs: 1000, writeStallMs: 1500 },
};
export const LEASE = { ttlMs: 2000, renewMs: 400 };
/** The simulated capsule's heartbeat interval (ms). */
export const CAPSULE_HEARTBEAT_MS = 500;

export interface FetchAnswer {
  status: number;
  retryAfter: string | null;
  body: string;
}

export interface SseEvent {
  at: number;
  eventId: string | null;
  event: string;
}

export interface SseHandle {
  readonly id: string;
  readonly opened: Promise<number>;
  readonly events: SseEvent[];
  /** Resolves with { at, reason } when the stream ends (either side). */
  readonly ended: Promise<{ at: number; reason: string }>;
  close(): void;
}

interface ClientMessage {
  at: number;
  id?: string;
  ev: string;
  [key: string]: unknown;
}

/** The client process in its namespace. */
export class LabClient {
  private seq = 0;
  private readonly handlers = new Map<string, (m: ClientMessage) => void>();

  constructor(readonly proc: LabProcess) {
    proc.child.stdout!.setEncoding('utf8');
    let buffered = '';
    proc.child.stdout!.on('data', (text: string) => {
      buffered += text;
      let cut: number;
      while ((cut = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, cut);
        buffered = buffered.slice(cut + 1);
        if (!line.startsWith('{')) continue;
        const m = JSON.parse(line) as ClientMessage;
        if (m.id) this.handlers.get(m.id)?.(m);
      }
    });
  }

  private send(command: Record<string, unknown>): void {
    this.proc.child.stdin!.write(`${JSON.stringify(command)}\n`);
  }

  fetch(
    url: string,
    options: { method?: string; body?: string; timeoutMs?: number } = {},
  ): Promise<FetchAnswer> {
    const id = `f${++this.seq}`;
    return new Promise<FetchAnswer>((resolve, reject) => {
      this.handlers.set(id, (m) => {
        this.handlers.delete(id);
        if (m.ev === 'response') resolve(m as unknown as FetchAnswer);
        else reject(new Error(`${url}: ${String(m.message)}`));
      });
      this.send({ id, op: 'fetch', url, ...options });
    });
  }

  async json<T>(url: string, timeoutMs = 3000): Promise<T> {
    const answer = await this.fetch(url, { timeoutMs });
    if (answer.status !== 200) throw new Error(`${url}: ${answer.status} ${answer.body}`);
    return JSON.parse(answer.body) as T;
  }

  sse(url: string, headers: Record<string, string> = {}): SseHandle {
    const id = `s${++this.seq}`;
    const events: SseEvent[] = [];
    let opened!: (status: number) => void;
    let ended!: (end: { at: number; reason: string }) => void;
    const handle: SseHandle = {
      id,
      events,
      opened: new Promise((r) => (opened = r)),
      ended: new Promise((r) => (ended = r)),
      close: () => this.send({ id: `c${id}`, op: 'close', target: id }),
    };
    this.handlers.set(id, (m) => {
      if (m.ev === 'open') opened(m.status as number);
      else if (m.ev === 'event')
        events.push({ at: m.at, eventId: m.eventId as string | null, event: m.event as string });
      else if (m.ev === 'end') {
        this.handlers.delete(id);
        opened(0);
        ended({ at: m.at, reason: m.reason as string });
      }
    });
    this.send({ id, op: 'sse', url, headers });
    return handle;
  }
}

export interface Replica {
  readonly id: string;
  readonly node: NetnsNode;
  readonly url: string;
  proc: LabProcess;
}

export interface CapsuleRow {
  id: string;
  upstream: string;
  upstream_reason: string | null;
  head_offset: number | null;
  owner: string | null;
  connections: Record<string, number>;
}

export interface PartitionFleet {
  lab: NetnsLab;
  redis: NetnsNode;
  capsule: NetnsNode;
  specCapsule: NetnsNode;
  client: LabClient;
  clientNode: NetnsNode;
  replicas: [Replica, Replica];
  /** This replica's /capsules row for the capsule, as the client sees it. */
  row(r: Replica, capsule?: string): Promise<{ store: string; row: CapsuleRow }>;
  /**
   * The replica that ingests the capsule (both agree, connected), and the other one, once that has
   * held for two lease TTLs: after a heal the preferred replica may still take the capsule back.
   */
  roles(capsule?: string): Promise<{ owner: Replica; other: Replica }>;
  close(): Promise<void>;
}

const configDir = mkdtempSync(join(tmpdir(), 'mg-partitions-'));

const tsx = (args: string[]): [string, string[]] => [process.execPath, ['--import', 'tsx', ...args]];

export const startPartitionFleet = async (): Promise<PartitionFleet> => {
  const lab = new NetnsLab();
  try {
    const redis = lab.node('redis');
    const capsule = lab.node('capsule');
    const nodeA = lab.node('a');
    const nodeB = lab.node('b');
    const clientNode = lab.node('client');
    const specCapsule = lab.node('spec');
    const redisProc = lab.spawn(redis, 'redis-server', [
      '--port',
      '6379',
      '--bind',
      redis.ip,
      '--save',
      '',
      '--appendonly',
      'no',
      '--protected-mode',
      'no',
    ]);
    const [simCmd, simArgs] = tsx([
      'src/cli.ts',
      'simulate',
      '--host',
      capsule.ip,
      '--port',
      '9000',
      '--release',
      '0.4',
      '--heartbeat-ms',
      String(CAPSULE_HEARTBEAT_MS),
      '--workload',
      '--seed',
      '7',
    ]);
    const sim = lab.spawn(capsule, simCmd, simArgs);
    const [specCmd, specArgs] = tsx([
      'src/cli.ts',
      'simulate',
      '--host',
      specCapsule.ip,
      '--port',
      '9000',
      '--release',
      'spec',
      '--workload',
      '--seed',
      '9',
    ]);
    const specSim = lab.spawn(specCapsule, specCmd, specArgs);
    const [clientCmd, clientArgs] = tsx(['test/support/netns-client.ts']);
    const clientProc = lab.spawn(clientNode, clientCmd, clientArgs);
    await Promise.all([
      redisProc.waitFor(/Ready to accept connections/),
      sim.waitFor(/"url":"/),
      specSim.waitFor(/"url":"/),
      clientProc.waitFor(/"ev":"ready"/),
    ]);
    const startReplica = (id: string, node: NetnsNode): Replica => {
      const file = join(configDir, `${lab.id}-${id}.json`);
      writeFileSync(
        file,
        JSON.stringify({
          fleet: { replicaId: id, lease: LEASE },
          store: { redis: `redis://${redis.ip}:6379`, ...LIVENESS.store },
          upstream: LIVENESS.upstream,
          downstream: LIVENESS.downstream,
          auth: { open: true },
          capsules: [
            { id: CAPSULE, url: `http://${capsule.ip}:9000` },
            { id: SPEC_CAPSULE, url: `http://${specCapsule.ip}:9000` },
          ],
          logLevel: 'info',
        }),
      );
      const [cmd, args] = tsx([
        'src/cli.ts',
        '--config',
        file,
        '--host',
        node.ip,
        '--port',
        String(GATEWAY_PORT),
      ]);
      return { id, node, url: `http://${node.ip}:${GATEWAY_PORT}`, proc: lab.spawn(node, cmd, args) };
    };
    const a = startReplica('a', nodeA);
    const b = startReplica('b', nodeB);
    await Promise.all([a, b].map((r) => r.proc.waitFor(/murmur-gateway listening on/, 30_000)));
    const client = new LabClient(clientProc);
    const row = async (r: Replica, capsule = CAPSULE): Promise<{ store: string; row: CapsuleRow }> => {
      const view = await client.json<{ store: string; capsules: CapsuleRow[] }>(`${r.url}/capsules`);
      const found = view.capsules.find((c) => c.id === capsule);
      if (!found) throw new Error(`${capsule} missing from ${r.id}'s /capsules`);
      return { store: view.store, row: found };
    };
    const replicas: [Replica, Replica] = [a, b];
    const roles = async (capsule = CAPSULE): Promise<{ owner: Replica; other: Replica }> => {
      let held: { owner: Replica; since: number } | null = null;
      return until(
        'one owner, connected, named by both replicas, for two lease TTLs',
        async () => {
          const rows = await Promise.all(replicas.map((r) => row(r, capsule)));
          const owner = rows[0]!.row.owner;
          const o = replicas.find((r) => r.id === owner);
          const settled =
            o && rows[1]!.row.owner === owner && (await row(o, capsule)).row.upstream === 'connected';
          if (!settled) {
            held = null;
            return null;
          }
          if (held?.owner !== o) held = { owner: o, since: Date.now() };
          if (Date.now() - held.since < 2 * LEASE.ttlMs) return null;
          return { owner: o, other: replicas.find((r) => r !== o)! };
        },
        30_000,
      );
    };
    return {
      lab,
      redis,
      capsule,
      specCapsule,
      client,
      clientNode,
      replicas,
      row,
      roles,
      close: () => lab.close(),
    };
  } catch (err) {
    await lab.close();
    throw err;
  }
};
