/**
 * Old config keys: each still works, lands where the grouped layout has it (values in seconds or
 * days converted to milliseconds), and says so once; a file that gives both keeps the new one.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { describe, expect, it } from 'vitest';
import { DEPRECATED_KEYS, migrateDeprecatedKeys } from '../../src/config/deprecated-keys.js';
import { ConfigError, loadConfig, readConfig } from '../../src/config/load.js';
import { configSchema } from '../../src/config/schema.js';

const dir = mkdtempSync(join(tmpdir(), 'mg-deprecated-'));
let files = 0;
const yamlFile = (value: unknown): string => {
  const p = join(dir, `c${++files}.yaml`);
  writeFileSync(p, stringify(value));
  return p;
};

const nest = (path: string, value: unknown): Record<string, unknown> =>
  path
    .split('.')
    .reverse()
    .reduce<unknown>((inner, key) => ({ [key]: inner }), value) as Record<string, unknown>;

const at = (value: unknown, path: string): unknown =>
  path.split('.').reduce<unknown>((v, key) => (v as Record<string, unknown> | undefined)?.[key], value);

/** A valid value for each old key, and what the new key then holds. */
const SAMPLES: Record<string, [unknown, unknown]> = {
  port: [9001, 9001],
  host: ['127.0.0.2', '127.0.0.2'],
  publicUrl: ['https://gw.example', 'https://gw.example'],
  workers: [2, 2],
  tls: [
    { cert: '/c.pem', key: '/k.pem' },
    { cert: '/c.pem', key: '/k.pem' },
  ],
  http2: [{ cleartext: true }, { cleartext: true }],
  cors: [{ origins: ['https://a.example'] }, { origins: ['https://a.example'] }],
  trustProxy: [2, 2],
  bodyLimitBytes: [2048, 2048],
  'limits.headersTimeoutSeconds': [7, 7000],
  'limits.bodyTimeoutSeconds': [0.25, 250],
  heartbeatSeconds: [1.5, 1500],
  longPollSeconds: [12, 12_000],
  idleControlSeconds: [9, 9000],
  maxQueuedRecords: [77, 77],
  'liveness.downstream.keepAliveMs': [2000, 2000],
  'liveness.downstream.writeStallMs': [700, 700],
  redis: ['redis://127.0.0.1:6390', 'redis://127.0.0.1:6390'],
  'retention.maxRecords': [55, 55],
  'retention.maxAgeSeconds': [3600, 3_600_000],
  'retention.maxBytes': [4096, 4096],
  'liveness.store.commandTimeoutMs': [900, 900],
  'liveness.store.probeMs': [300, 300],
  'liveness.store.unreachableAfterMs': [1200, 1200],
  maxPendingAppends: [321, 321],
  maxPendingBytes: [654_321, 654_321],
  appendLingerMs: [0, 0],
  'liveness.upstream.keepAliveMs': [3000, 3000],
  'liveness.upstream.connectTimeoutMs': [800, 800],
  'liveness.upstream.heartbeatMs': [500, 500],
  'liveness.upstream.heartbeatMisses': [4, 4],
  'liveness.upstream.giveUpAfterMs': [900, 900],
  'liveness.upstream.giveUpCooldownMs': [0, 0],
  replicaId: ['gw-old', 'gw-old'],
  lease: [
    { ttlMs: 4000, renewMs: 500 },
    { ttlMs: 4000, renewMs: 500 },
  ],
  discoverRunning: ['/tmp/running', '/tmp/running'],
  apiKeys: [
    [{ sha256: 'a'.repeat(64), owner: 'alice' }],
    [{ sha256: 'a'.repeat(64), owner: 'alice', scopes: ['submit'], capsules: ['*'], streams: [] }],
  ],
  jwt: [
    { issuer: 'i', audience: 'a', secret: 'a-secret-of-sixteen+' },
    { issuer: 'i', audience: 'a', secret: 'a-secret-of-sixteen+' },
  ],
  adminTokens: [[{ sha256: 'b'.repeat(64) }], [{ sha256: 'b'.repeat(64) }]],
  'auth.ticketTtlSeconds': [120, 120_000],
  'queue.retryAfterSeconds': [3, 3000],
  submitStoreTimeoutSeconds: [2, 2000],
  'durableStreams.webhooks.allowLoopback': [true, true],
  'durableStreams.webhooks.allowHosts': [['Hooks.Example'], ['hooks.example']],
  'durableStreams.webhooks.timeoutSeconds': [4, 4000],
  'durableStreams.subscriptions.replayWindowSeconds': [600, 600_000],
  'durableStreams.subscriptions.keyRotationDays': [30, 30 * 86_400_000],
};

describe('deprecated config keys', () => {
  it('the table covers every old key', () => {
    expect(Object.keys(SAMPLES).sort()).toEqual(DEPRECATED_KEYS.map((k) => k.from).sort());
  });

  it.each(DEPRECATED_KEYS.map((k) => [k.from, k.to, k]))(
    '%s → %s: accepted from a file, moved, and warned about once',
    (from, to, key) => {
      const [given, expected] = SAMPLES[from]!;
      // Workers past 1 need Redis; the key's own value is what is checked.
      const companion = from === 'workers' ? { store: { redis: 'redis://127.0.0.1:6379' } } : {};
      const { config, deprecations } = readConfig(
        { config: yamlFile({ ...nest(from, given), ...companion }) },
        {},
      );
      expect(at(config, to)).toEqual(expected);
      const unit = key.unit ? ` (milliseconds; "${from}" was in ${key.unit})` : '';
      expect(deprecations.map((d) => d.message)).toEqual([
        `config key "${from}" is deprecated: use "${to}"${unit}`,
      ]);
    },
  );

  it('the warnings, word for word', () => {
    const { deprecations } = readConfig(
      {
        config: yamlFile({
          heartbeatSeconds: 5,
          maxPendingAppends: 10,
          lease: { ttlMs: 4000, renewMs: 500 },
        }),
      },
      {},
    );
    expect(deprecations.map((d) => d.message)).toEqual([
      'config key "heartbeatSeconds" is deprecated: use "downstream.heartbeatMs" (milliseconds; "heartbeatSeconds" was in seconds)',
      'config key "maxPendingAppends" is deprecated: use "store.maxPendingEntries"',
      'config key "lease" is deprecated: use "fleet.lease"',
    ]);
  });

  it('a file with both the old and the new key: the new one is used, and the warning says so', () => {
    const p = yamlFile({
      heartbeatSeconds: 5,
      downstream: { heartbeatMs: 2500 },
      port: 9001,
      server: { port: 9002 },
      maxPendingAppends: 10,
    });
    const { config, deprecations } = readConfig({ config: p }, {});
    expect(config.downstream.heartbeatMs).toBe(2500);
    expect(config.server.port).toBe(9002);
    expect(config.store.maxPendingEntries).toBe(10);
    expect(deprecations.map((d) => d.message)).toEqual([
      'config key "port" is deprecated: use "server.port"; both are given, so "server.port" is used and "port" ignored',
      'config key "heartbeatSeconds" is deprecated: use "downstream.heartbeatMs" (milliseconds; "heartbeatSeconds" was in seconds); both are given, so "downstream.heartbeatMs" is used and "heartbeatSeconds" ignored',
      'config key "maxPendingAppends" is deprecated: use "store.maxPendingEntries"',
    ]);
  });

  it('an old group moved whole beside new keys of the same group keeps both', () => {
    const p = yamlFile({
      liveness: { store: { probeMs: 400 }, upstream: { heartbeatMisses: 5 } },
      store: { commandTimeoutMs: 700 },
      retention: { maxAgeSeconds: 60 },
    });
    const { config } = readConfig({ config: p }, {});
    expect(config.store).toMatchObject({ probeMs: 400, commandTimeoutMs: 700 });
    expect(config.store.retention).toEqual({
      maxRecords: 100_000,
      maxAgeMs: 60_000,
      maxBytes: 256 * 1024 * 1024,
    });
    expect(config.upstream.heartbeatMisses).toBe(5);
  });

  it('env and flags set the new places over a file with old keys', () => {
    const p = yamlFile({ port: 9001, redis: 'redis://127.0.0.1:6390', replicaId: 'from-file' });
    const { config, deprecations } = readConfig(
      { config: p, port: '9003' },
      { REDIS_URL: 'redis://127.0.0.1:6391', REPLICA_ID: 'from-env' },
    );
    expect(config.server.port).toBe(9003);
    expect(config.store.redis).toBe('redis://127.0.0.1:6391');
    expect(config.fleet.replicaId).toBe('from-env');
    expect(deprecations.map((d) => d.from)).toEqual(['port', 'redis', 'replicaId']);
  });

  it('a file in the new layout has nothing to warn about (the shipped example too)', () => {
    expect(readConfig({ config: 'config/gateway.example.yaml' }, {}).deprecations).toEqual([]);
    expect(readConfig({ config: 'config/compose-gateway.yaml' }, {}).deprecations).toEqual([]);
    expect(readConfig({}, { PORT: '9000', REDIS_URL: 'redis://h:1' }).deprecations).toEqual([]);
  });

  it('the settings block of docs/configuration.md is in the new layout: no old key, no unknown key', () => {
    const doc = readFileSync('docs/configuration.md', 'utf8');
    const block = /The config file holds[\s\S]*?```yaml\n([\s\S]*?)```/.exec(doc)![1]!;
    const written = parse(block) as Record<string, unknown>;
    expect(migrateDeprecatedKeys(written).deprecations).toEqual([]);
    const result = configSchema.safeParse(written);
    // Placeholders (a short `secret: ...`) may be refused; a name the schema does not know may not.
    expect(result.error?.issues.filter((i) => i.code === 'unrecognized_keys') ?? []).toEqual([]);
  });

  it('a bad value under a new name gives the exact path; under an old name the path says where it came from', () => {
    const errorOf = (value: unknown): string => {
      try {
        loadConfig({ config: yamlFile(value) }, {});
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as Error).message.split('\n').slice(1).join('\n');
      }
      throw new Error('expected a ConfigError');
    };
    expect(errorOf({ downstream: { heartbeatMs: -1 } })).toBe(
      '  downstream.heartbeatMs: Too small: expected number to be >0',
    );
    expect(errorOf({ heartbeatSeconds: -1 })).toBe(
      '  downstream.heartbeatMs (given as heartbeatSeconds): Too small: expected number to be >0',
    );
    expect(errorOf({ queue: { retryAfterMs: 'soon' } })).toBe(
      '  queue.retryAfterMs: Invalid input: expected number, received string',
    );
    expect(errorOf({ queue: { retryAfterSeconds: 'soon' } })).toBe(
      '  queue.retryAfterMs (given as queue.retryAfterSeconds): Invalid input: expected number, received string',
    );
    expect(errorOf({ auth: { apiKeys: [{ sha256: 'x', owner: 'a' }] } })).toBe(
      '  auth.apiKeys[0].sha256: must be the lowercase hex SHA-256 of the key (64 characters)',
    );
    expect(errorOf({ apiKeys: [{ sha256: 'x', owner: 'a' }] })).toBe(
      '  auth.apiKeys[0].sha256 (given as apiKeys): must be the lowercase hex SHA-256 of the key (64 characters)',
    );
    // A bad value from the environment over an old key's is the environment's.
    expect(
      (() => {
        try {
          loadConfig({ config: yamlFile({ port: 9000 }) }, { PORT: '70000' });
        } catch (err) {
          return (err as Error).message.split('\n')[1];
        }
        return 'no error';
      })(),
    ).toBe('  server.port: Too big: expected number to be <=65535');
    // An old key the new layout has no place for is still an unknown key, named as written.
    expect(errorOf({ liveness: { upstream: { heartbeat: 3 } } })).toBe(
      '  (root): Unrecognized key: "liveness"',
    );
  });

  it('the migration leaves its input as it was', () => {
    const input = { liveness: { store: { probeMs: 400 } }, retention: { maxRecords: 5 } };
    const before = structuredClone(input);
    const { config } = migrateDeprecatedKeys(input);
    expect(input).toEqual(before);
    expect(config).toEqual({ store: { probeMs: 400, retention: { maxRecords: 5 } } });
  });

  it('the schema itself takes only the new names', () => {
    const result = configSchema.safeParse({ heartbeatSeconds: 5 });
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.message).toBe('Unrecognized key: "heartbeatSeconds"');
  });
});
