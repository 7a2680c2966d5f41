/**
 * The whole gateway for black-box tests: config → store → ingestion → hub → all adapters → HTTP on
 * 127.0.0.1, a free port. Short intervals are passed through `config`; nothing is mocked.
 */
import { createHash, randomUUID } from 'node:crypto';
import { configSchema, type GatewayConfigInput } from '../../src/config/schema.js';
import type { GatewayCore } from '../../src/core/types.js';
import { startGateway, type GatewayTuning, type RunningGateway } from '../../src/gateway.js';
import { createLogger } from '../../src/logger.js';

export interface TestGatewayOptions {
  /** capsule id → simulator url */
  capsules: Record<string, string>;
  /** default: the embedded memory store */
  redisUrl?: string;
  /** e.g. a short upstream reconnect backoff for tests that cut or stop capsules */
  tuning?: GatewayTuning;
  /**
   * Config fields passed as they are (e.g. auth.adminTokens, fleet.discoverRunning); each group given
   * is merged over what the options above set in it.
   */
  extra?: Partial<GatewayConfigInput>;
  config?: Partial<{
    heartbeatMs: number;
    longPollMaxMs: number;
    idleControlMs: number;
    bodyLimitBytes: number;
    publicUrl: string | null;
    /** The gateway's `apiKeys` (owners with the default scopes unless given); TEST_OPS_KEY is added. */
    apiKeys: { sha256: string; owner: string; scopes?: ('submit' | 'observe' | 'control')[] }[];
    maxQueuedRecords: number;
    corsOrigins: string[];
    retention: { maxRecords: number; maxAgeMs: number };
    doorTokens: Record<string, string>;
  }>;
}

export interface TestGateway {
  baseUrl: string;
  core: GatewayCore;
  gateway: RunningGateway;
  close(): Promise<void>;
}

let gatewaysStarted = 0;

const isGroup = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** `extra` over `base`, one group at a time (a group `extra` names keeps the base's other keys). */
export const withExtra = (
  base: GatewayConfigInput,
  extra: Partial<GatewayConfigInput> = {},
): GatewayConfigInput => {
  const merged: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(extra)) {
    const under = merged[key];
    merged[key] = isGroup(under) && isGroup(value) ? { ...under, ...value } : value;
  }
  return merged as GatewayConfigInput;
};

/** An operator key every test gateway with keys accepts for /capsules and /metrics. */
export const TEST_OPS_KEY = 'test-ops-key-0123456789abcdef';
const TEST_OPS_ENTRY = {
  sha256: createHash('sha256').update(TEST_OPS_KEY).digest('hex'),
  owner: 'test-ops',
  scopes: ['ops' as const],
};
export const TEST_OPS_HEADERS = { authorization: `Bearer ${TEST_OPS_KEY}` };

export const startTestGateway = async (opts: TestGatewayOptions): Promise<TestGateway> => {
  const c = opts.config ?? {};
  const built: GatewayConfigInput = {
    server: {
      port: 0,
      host: '127.0.0.1',
      cors: { origins: c.corsOrigins ?? [] },
      publicUrl: c.publicUrl ?? null,
      ...(c.bodyLimitBytes !== undefined ? { bodyLimitBytes: c.bodyLimitBytes } : {}),
    },
    store: {
      redis: opts.redisUrl ?? null,
      ...(c.retention
        ? { retention: { maxRecords: c.retention.maxRecords, maxAgeMs: c.retention.maxAgeMs } }
        : {}),
    },
    downstream: {
      ...(c.heartbeatMs !== undefined ? { heartbeatMs: c.heartbeatMs } : {}),
      ...(c.longPollMaxMs !== undefined ? { longPollMaxMs: c.longPollMaxMs } : {}),
      ...(c.idleControlMs !== undefined ? { idleControlMs: c.idleControlMs } : {}),
      ...(c.maxQueuedRecords !== undefined ? { maxQueuedRecords: c.maxQueuedRecords } : {}),
    },
    capsules: Object.entries(opts.capsules).map(([id, url]) => ({
      id,
      url,
      ...(c.doorTokens?.[id] ? { doorToken: c.doorTokens[id] } : {}),
    })),
    // With keys configured, /capsules and /metrics need the ops scope: tests read them with TEST_OPS_KEY.
    auth: { apiKeys: c.apiKeys?.length ? [...c.apiKeys, TEST_OPS_ENTRY] : [] },
    logLevel: (process.env.TEST_LOG_LEVEL as 'info' | undefined) ?? 'silent',
    // Gateways in one test process are distinct replicas (the default id is host name + pid).
    fleet: { replicaId: `test-${process.pid}-${++gatewaysStarted}` },
  };
  const input = withExtra(built, opts.extra);
  const config = configSchema.parse(input);
  // Gateways sharing the test Redis are separate fleets unless a test gives them one registry.
  const tuning: GatewayTuning = {
    ...opts.tuning,
    fleet: { registryKey: `mg:fleet:capsules:test-${randomUUID()}`, ...opts.tuning?.fleet },
  };
  const gateway = await startGateway(config, createLogger(config.logLevel), tuning);
  return {
    baseUrl: gateway.url,
    core: gateway.core,
    gateway,
    close: () => gateway.close({ flushTimeoutMs: 2_000 }),
  };
};
