/**
 * The BeeOS conformance rig: a real src/simulator capsule behind the whole gateway
 * (startTestGateway: ingestion, log, hub, every adapter), two owners' keys, small HTTP helpers and
 * the capsule-side truth (what the simulator wrote) the tests compare the BeeOS view against.
 */
import { hashApiKey } from '../../../support/api-keys.js';
import type { GatewayCore } from '../../../../src/core/types.js';
import type { LogRecord } from '../../../../src/log/record.js';
import { startSimulator } from '../../../../src/simulator/index.js';
import type { SimulatedCapsule } from '../../../../src/simulator/index.js';
import { startTestGateway } from '../../../support/gateway.js';
import type { TestGateway } from '../../../support/gateway.js';
import { uniqueCapsule } from '../../../support/redis.js';
import { KEY_ALICE, KEY_BOB } from './harness.js';
import { readSse } from './sse-client.js';
import type { SseEvent } from './sse-client.js';

export { KEY_ALICE, KEY_BOB, KEY_UNKNOWN } from './harness.js';

export const ALICE = { Authorization: `Bearer ${KEY_ALICE}` };
export const BOB = { Authorization: `Bearer ${KEY_BOB}` };

export interface RigOptions {
  redisUrl?: string;
  capsule?: string;
  retention?: { maxRecords: number; maxAgeMs: number };
  heartbeatMs?: number;
  /** Reuse a running simulator (gateway restart on the same capsule). */
  sim?: SimulatedCapsule;
}

export interface Rig {
  sim: SimulatedCapsule;
  gw: TestGateway;
  capsule: string;
  /** `${baseUrl}/api/v1/agents/${capsule}` */
  api: string;
  close(): Promise<void>;
}

export const startRig = async (opts: RigOptions = {}): Promise<Rig> => {
  const sim = opts.sim ?? (await startSimulator({ heartbeatMs: 1_000 }));
  const capsule = opts.capsule ?? uniqueCapsule('bee');
  const gw = await startTestGateway({
    capsules: { [capsule]: sim.url },
    ...(opts.redisUrl ? { redisUrl: opts.redisUrl } : {}),
    config: {
      heartbeatMs: opts.heartbeatMs ?? 5_000,
      apiKeys: [
        { sha256: hashApiKey(KEY_ALICE), owner: 'alice' },
        { sha256: hashApiKey(KEY_BOB), owner: 'bob' },
      ],
      ...(opts.retention ? { retention: opts.retention } : {}),
    },
  });
  return {
    sim,
    gw,
    capsule,
    api: `${gw.baseUrl}/api/v1/agents/${capsule}`,
    close: async () => {
      await gw.close();
      if (!opts.sim) await sim.stop();
    },
  };
};

export const postJson = (
  url: string,
  body: unknown,
  headers: Record<string, string> = ALICE,
): Promise<Response> =>
  fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });

export const getJson = async <T = Record<string, unknown>>(
  url: string,
  headers: Record<string, string> = ALICE,
): Promise<{ status: number; body: { success: boolean; data: T; error?: Record<string, string> } }> => {
  const res = await fetch(url, { headers });
  return { status: res.status, body: (await res.json()) as never };
};

export const createTask = async (rig: Rig, message: string, headers = ALICE) => {
  const res = await postJson(`${rig.api}/tasks`, { message }, headers);
  if (res.status !== 202) throw new Error(`create task: ${res.status} ${await res.text()}`);
  const { data } = (await res.json()) as { data: { task_id: string } };
  const status = await getJson<{ context_id: string }>(`${rig.api}/tasks/${data.task_id}`, headers);
  return { taskId: data.task_id, contextId: status.body.data.context_id };
};

interface StatusData {
  id: string;
  context_id?: string;
  status: { state: string; message: string; response?: string };
}

/** The capsule's own `status` frames of a context, in write order (the truth). */
export const capsuleStatuses = (sim: SimulatedCapsule, contextId: string): StatusData[] => {
  const out: StatusData[] = [];
  const tasks = new Set<string>();
  for (const f of sim.written) {
    if (f.event !== 'status') continue;
    const d = JSON.parse(f.data) as StatusData;
    if (d.context_id === contextId) tasks.add(d.id);
    if (tasks.has(d.id)) out.push(d);
  }
  return out;
};

/** The capsule task id of a context and every frame the capsule wrote for it. */
export const capsuleFrames = (sim: SimulatedCapsule, contextId: string) => {
  const taskId = capsuleStatuses(sim, contextId)[0]?.id;
  const frames = sim.written.filter((f) => (JSON.parse(f.data) as { id?: string }).id === taskId);
  return { taskId, frames };
};

/** Wait (on the log, never on a clock) until `pred` holds for some record of the capsule's log. */
export const waitForRecord = async (
  core: GatewayCore,
  capsule: string,
  pred: (r: LogRecord) => boolean,
  after = 0,
): Promise<LogRecord> => {
  let cursor = after;
  for (let i = 0; i < 10_000; i++) {
    const r = await core.waitAfter(capsule, cursor, 500, 5_000);
    for (const rec of r.records) {
      if (pred(rec)) return rec;
      cursor = rec.offset;
    }
  }
  throw new Error('waitForRecord: bounded loop exhausted');
};

/** An SSE connection read step by step: `until(pred)` returns the events up to the match. */
export interface SseSession {
  status: number;
  until(pred: (ev: SseEvent) => boolean): Promise<SseEvent[]>;
  /** Every event until the stream closes. */
  rest(): Promise<SseEvent[]>;
  close(): void;
}

export const openSse = async (
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<SseSession> => {
  const ac = new AbortController();
  const res = await fetch(url, {
    ...init,
    headers: { Accept: 'text/event-stream', ...init.headers },
    signal: ac.signal,
  });
  const it = res.ok ? readSse(res) : null;
  const pull = async (pred: (ev: SseEvent) => boolean): Promise<SseEvent[]> => {
    const out: SseEvent[] = [];
    if (!it) return out;
    for (;;) {
      const n = await it.next();
      if (n.done) return out;
      if (n.value.comment !== undefined && n.value.data === '') continue;
      out.push(n.value);
      if (pred(n.value)) return out;
    }
  };
  return { status: res.status, until: pull, rest: () => pull(() => false), close: () => ac.abort() };
};

/** Parse `event: message` data. */
export const envelopesOf = <T = Record<string, unknown>>(events: SseEvent[]): T[] =>
  events.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as T);
