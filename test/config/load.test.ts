import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/load.js';

const dir = mkdtempSync(join(tmpdir(), 'mg-config-'));
const file = (name: string, text: string): string => {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
};

const errorOf = (fn: () => unknown): string => {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error('expected a ConfigError');
};

describe('loadConfig', () => {
  it('applies defaults with nothing given', () => {
    const cfg = loadConfig({}, {});
    expect(cfg).toMatchObject({
      // no auth configured: loopback by default (secure by default)
      server: { port: 8080, host: '127.0.0.1', publicUrl: null, bodyLimitBytes: 1024 * 1024 },
      store: { redis: null, appendLingerMs: 5 },
      capsules: [],
      demo: false,
    });
    expect(cfg.downstream.heartbeatMs).toBe(15_000);
    expect(cfg.downstream.longPollMaxMs).toBe(30_000);
  });

  it('reads YAML, then env overrides the file, then flags override env', () => {
    const p = file(
      'ok.yaml',
      `server: {port: 9000, host: 127.0.0.1}\ncapsules:\n  - id: alpha\n    url: http://127.0.0.1:5001/\n    doorToken: s3cret\n`,
    );
    expect(loadConfig({ config: p }, {}).server.port).toBe(9000);
    expect(loadConfig({ config: p }, { PORT: '9100' }).server.port).toBe(9100);
    expect(loadConfig({ config: p, port: '9200' }, { PORT: '9100' }).server.port).toBe(9200);
    const cfg = loadConfig(
      { config: p, capsule: ['alpha=http://127.0.0.1:6001/', 'beta=http://127.0.0.1:6002/'] },
      {},
    );
    // Flags replace the list but keep the door token the file gave the same capsule id.
    expect(cfg.capsules).toEqual([
      { id: 'alpha', url: 'http://127.0.0.1:6001/', doorToken: 's3cret' },
      { id: 'beta', url: 'http://127.0.0.1:6002/' },
    ]);
  });

  it('the log level: file, then LOG_LEVEL, then --log-level; a bad one names the field', () => {
    const p = file('level.yaml', 'logLevel: warn\n');
    expect(loadConfig({ config: p }, {}).logLevel).toBe('warn');
    expect(loadConfig({ config: p }, { LOG_LEVEL: 'debug' }).logLevel).toBe('debug');
    expect(loadConfig({ config: p, logLevel: 'error' }, { LOG_LEVEL: 'debug' }).logLevel).toBe('error');
    expect(loadConfig({}, { LOG_LEVEL: '' }).logLevel).toBe('info');
    expect(errorOf(() => loadConfig({}, { LOG_LEVEL: 'loud' }))).toBe(
      'invalid configuration (flags and environment):\n  logLevel: Invalid option: expected one of "fatal"|"error"|"warn"|"info"|"debug"|"trace"|"silent"',
    );
  });

  it('TLS: file, then TLS_CERT/TLS_KEY, then --tls-cert/--tls-key; one without the other names the field', () => {
    const p = file(
      'tls.yaml',
      'server:\n  tls: {cert: /etc/a.pem, key: /etc/a.key}\n  http2: {cleartext: false}\n',
    );
    expect(loadConfig({ config: p }, {}).server.tls).toEqual({ cert: '/etc/a.pem', key: '/etc/a.key' });
    expect(loadConfig({ config: p }, { TLS_CERT: '/e/c.pem', TLS_KEY: '/e/k.pem' }).server.tls).toEqual({
      cert: '/e/c.pem',
      key: '/e/k.pem',
    });
    expect(
      loadConfig({ tlsCert: '/f/c.pem', tlsKey: '/f/k.pem' }, { TLS_CERT: '/e/c.pem' }).server.tls,
    ).toEqual({
      cert: '/f/c.pem',
      key: '/f/k.pem',
    });
    expect(loadConfig({}, {}).server.tls).toBeNull();
    expect(errorOf(() => loadConfig({ tlsCert: '/f/c.pem' }, {}))).toBe(
      'invalid configuration (flags and environment):\n  server.tls.key: must name a PEM file',
    );
    expect(errorOf(() => loadConfig({}, { TLS_KEY: '/e/k.pem' }))).toBe(
      'invalid configuration (flags and environment):\n  server.tls.cert: must name a PEM file',
    );
  });

  it('takes door tokens from the environment for capsules the file gave none, the file winning', () => {
    const p = file(
      'doors.yaml',
      `capsules:\n  - id: alpha\n    url: http://127.0.0.1:5001/\n    doorToken: from-file\n  - id: beta-1\n    url: http://127.0.0.1:5002/\n  - id: gamma\n    url: http://127.0.0.1:5003/\n`,
    );
    const cfg = loadConfig(
      { config: p },
      {
        MURMUR_DOOR_TOKEN_ALPHA: 'ignored',
        MURMUR_DOOR_TOKEN_BETA_1: 'beta-env',
        MURMUR_DOOR_TOKEN: 'shared',
      },
    );
    expect(cfg.capsules.map((c) => [c.id, c.doorToken])).toEqual([
      ['alpha', 'from-file'],
      ['beta-1', 'beta-env'],
      ['gamma', 'shared'],
    ]);
    expect(loadConfig({ config: p }, {}).capsules.map((c) => c.doorToken)).toEqual([
      'from-file',
      undefined,
      undefined,
    ]);
  });

  it('reads JSON config files and the GATEWAY_CONFIG / CAPSULES / REDIS_URL / PUBLIC_URL env', () => {
    const p = file(
      'ok.json',
      JSON.stringify({
        downstream: { longPollMaxMs: 5000 },
        server: { cors: { origins: ['https://app.example'] } },
      }),
    );
    const cfg = loadConfig(
      {},
      {
        GATEWAY_CONFIG: p,
        CAPSULES: 'a=http://127.0.0.1:1/,b=http://127.0.0.1:2/',
        REDIS_URL: 'redis://127.0.0.1:6379',
        PUBLIC_URL: 'https://gw.example',
      },
    );
    expect(cfg.downstream.longPollMaxMs).toBe(5000);
    expect(cfg.server.cors.origins).toEqual(['https://app.example']);
    expect(cfg.capsules.map((c) => c.id)).toEqual(['a', 'b']);
    expect(cfg.store.redis).toBe('redis://127.0.0.1:6379');
    expect(cfg.server.publicUrl).toBe('https://gw.example');
  });

  it.each([
    [
      'a capsule URL that is not a URL',
      'capsules:\n  - id: alpha\n    url: nope\n',
      'capsules[0].url: must be an http:// or https:// URL',
    ],
    ['a bad capsule id', 'capsules:\n  - id: "-bad"\n    url: http://h/\n', 'capsules[0].id: must match'],
    [
      'a duplicate capsule id',
      'capsules:\n  - {id: a, url: "http://h/"}\n  - {id: a, url: "http://h/"}\n',
      'capsules[1].id: duplicate capsule id "a"',
    ],
    ['an unknown field', 'prot: 80\n', 'Unrecognized key: "prot"'],
    ['an unknown field in a group', 'server: {prot: 80}\n', 'server: Unrecognized key: "prot"'],
    [
      'a port of the wrong type',
      'server: {port: eighty}\n',
      'server.port: Invalid input: expected number, received string',
    ],
    ['a port out of range', 'server: {port: 70000}\n', 'server.port: Too big'],
    ['a port out of range under its old key', 'port: 70000\n', 'server.port (given as port): Too big'],
    [
      'a group that is not a mapping',
      'server: 8080\n',
      'server: Invalid input: expected object, received number',
    ],
    [
      'a redis URL of the wrong scheme',
      'store: {redis: "http://h:6379"}\n',
      'store.redis: must be a redis:// or rediss:// URL',
    ],
    [
      'a redis setting of no known form',
      'store: {redis: {host: h}}\n',
      'store.redis: must be a redis:// or rediss:// URL, {sentinels: [...], name} or {cluster: [...]}',
    ],
    [
      'an empty sentinel list',
      'store: {redis: {sentinels: [], name: mymaster}}\n',
      'store.redis.sentinels: must list at least one sentinel',
    ],
    [
      'a sentinel that is no address',
      'store: {redis: {sentinels: ["redis://127.0.0.1:26379", "http://h:1", {host: h}], name: mymaster}}\n',
      'store.redis.sentinels[1]: must be a redis://host:port URL or {host, port}',
    ],
    [
      'a sentinel object without a port',
      'store: {redis: {sentinels: [{host: h}], name: mymaster}}\n',
      'store.redis.sentinels[0]: must be a redis://host:port URL or {host, port}',
    ],
    [
      'sentinels without a master name',
      'store: {redis: {sentinels: ["redis://127.0.0.1:26379"]}}\n',
      'store.redis.name: must be the name the sentinels monitor the master under (e.g. mymaster)',
    ],
    [
      'an empty sentinel password',
      'store: {redis: {sentinels: ["redis://127.0.0.1:26379"], name: m, sentinelPassword: ""}}\n',
      'store.redis.sentinelPassword: must not be empty',
    ],
    [
      'an unknown sentinel setting',
      'store: {redis: {sentinels: ["redis://127.0.0.1:26379"], name: m, master: x}}\n',
      'store.redis: Unrecognized key: "master"',
    ],
    [
      'an empty cluster',
      'store: {redis: {cluster: []}}\n',
      'store.redis.cluster: must list at least one node',
    ],
    [
      'a cluster given as one string',
      'store: {redis: {cluster: "redis://127.0.0.1:7000"}}\n',
      'store.redis.cluster: must be a list of redis:// URLs',
    ],
    [
      'a cluster node that is no redis URL',
      'store: {redis: {cluster: ["redis://127.0.0.1:7000", "127.0.0.1:7001"]}}\n',
      'store.redis.cluster[1]: must be a redis:// or rediss:// URL',
    ],
    [
      'cluster nodes with mixed TLS',
      'store: {redis: {cluster: ["redis://127.0.0.1:7000", "rediss://127.0.0.1:7001"]}}\n',
      'store.redis.cluster[1]: must use the same scheme and credentials as cluster[0]',
    ],
    [
      'a cluster node that is no redis URL, under the old key',
      'redis: {cluster: ["redis://127.0.0.1:7000", "127.0.0.1:7001"]}\n',
      'store.redis.cluster[1] (given as redis): must be a redis:// or rediss:// URL',
    ],
    [
      'an API key that is not a hash',
      'auth:\n  apiKeys:\n    - {sha256: oag_abc, owner: alice}\n',
      'auth.apiKeys[0].sha256: must be the lowercase hex SHA-256',
    ],
    ['a list at the root', '- a\n- b\n', '(root): must be a mapping of settings'],
    [
      'a negative append linger',
      'store: {appendLingerMs: -1}\n',
      'store.appendLingerMs: Too small: expected number to be >=0',
    ],
    [
      'an append linger over a second',
      'store: {appendLingerMs: 5000}\n',
      'store.appendLingerMs: Too big: expected number to be <=1000',
    ],
    [
      'an append linger that is no number',
      'store: {appendLingerMs: fast}\n',
      'store.appendLingerMs: Invalid input: expected number, received string',
    ],
    [
      'a store command timeout below 50 ms',
      'store: {commandTimeoutMs: 10}\n',
      'store.commandTimeoutMs: Too small: expected number to be >=50',
    ],
    [
      'a heartbeat miss count below 1.5',
      'upstream: {heartbeatMisses: 1}\n',
      'upstream.heartbeatMisses: Too small: expected number to be >=1.5',
    ],
    [
      'a write stall that is no number',
      'downstream: {writeStallMs: soon}\n',
      'downstream.writeStallMs: Invalid input: expected number, received string',
    ],
    [
      'a write stall that is no number, under its old key',
      'liveness: {downstream: {writeStallMs: soon}}\n',
      'downstream.writeStallMs (given as liveness.downstream.writeStallMs): Invalid input: expected number, received string',
    ],
    ['an unknown upstream setting', 'upstream: {heartbeat: 3}\n', 'upstream: Unrecognized key: "heartbeat"'],
    [
      'a long-poll over five minutes',
      'downstream: {longPollMaxMs: 300001}\n',
      'downstream.longPollMaxMs: Too big: expected number to be <=300000',
    ],
    [
      'a long-poll over five minutes, in seconds under the old key',
      'longPollSeconds: 301\n',
      'downstream.longPollMaxMs (given as longPollSeconds): Too big: expected number to be <=300000',
    ],
    [
      'a lease renewed less often than half its TTL',
      'fleet: {lease: {ttlMs: 1000, renewMs: 600}}\n',
      'fleet.lease: renewMs must be at most half of ttlMs',
    ],
    [
      'a ticket lifetime under a second',
      'auth: {ticketTtlMs: 999}\n',
      'auth.ticketTtlMs: Too small: expected number to be >=1000',
    ],
  ])('rejects %s naming the field', (_name, text, expected) => {
    const p = file(`bad-${Math.random().toString(36).slice(2)}.yaml`, text);
    const message = errorOf(() => loadConfig({ config: p }, {}));
    expect(message).toContain(`invalid configuration (${p})`);
    expect(message).toContain(expected);
  });

  it('accepts the three redis forms: a URL, Sentinel and Cluster, from a file or the environment', () => {
    const sentinel = file(
      'sentinel.yaml',
      'store:\n  redis:\n    sentinels: ["redis://10.0.0.1:26379", {host: 10.0.0.2, port: 26380}]\n    name: mymaster\n    password: pw\n    sentinelPassword: spw\n',
    );
    expect(loadConfig({ config: sentinel }, {}).store.redis).toEqual({
      sentinels: ['redis://10.0.0.1:26379', { host: '10.0.0.2', port: 26380 }],
      name: 'mymaster',
      password: 'pw',
      sentinelPassword: 'spw',
    });
    const cluster = file(
      'cluster.yaml',
      'store:\n  redis:\n    cluster: ["rediss://:pw@10.0.0.1:7000", "rediss://:pw@10.0.0.2:7000"]\n',
    );
    expect(loadConfig({ config: cluster }, {}).store.redis).toEqual({
      cluster: ['rediss://:pw@10.0.0.1:7000', 'rediss://:pw@10.0.0.2:7000'],
    });
    expect(loadConfig({}, { REDIS_URL: 'rediss://u:p@h:6380/2' }).store.redis).toBe('rediss://u:p@h:6380/2');
    expect(loadConfig({}, { REDIS_CLUSTER: 'redis://a:7000, redis://b:7000' }).store.redis).toEqual({
      cluster: ['redis://a:7000', 'redis://b:7000'],
    });
    expect(
      loadConfig(
        {},
        {
          REDIS_SENTINELS: 'redis://a:26379,redis://b:26379',
          REDIS_SENTINEL_NAME: 'm',
          REDIS_PASSWORD: 'pw',
        },
      ).store.redis,
    ).toEqual({ sentinels: ['redis://a:26379', 'redis://b:26379'], name: 'm', password: 'pw' });
    // The --redis flag (a URL) overrides whichever form the file gave.
    expect(loadConfig({ config: cluster, redis: 'redis://127.0.0.1:6379' }, {}).store.redis).toBe(
      'redis://127.0.0.1:6379',
    );
  });

  it('rejects two redis forms in the environment, and sentinels without a name', () => {
    expect(errorOf(() => loadConfig({}, { REDIS_URL: 'redis://a:1', REDIS_CLUSTER: 'redis://b:2' }))).toBe(
      'invalid configuration (REDIS_URL, REDIS_CLUSTER): set only one of them',
    );
    expect(errorOf(() => loadConfig({}, { REDIS_SENTINELS: 'redis://a:26379' }))).toBe(
      'invalid configuration (flags and environment):\n  store.redis.name: must be the name the sentinels monitor the master under (e.g. mymaster)',
    );
  });

  it('accepts the example config shipped in config/', () => {
    const cfg = loadConfig({ config: 'config/gateway.example.yaml' }, {});
    expect(cfg.capsules).toEqual([{ id: 'alpha', url: 'http://127.0.0.1:52222/' }]);
    expect(cfg.store.redis).toBe('redis://127.0.0.1:6379');
    expect(cfg.store.retention).toEqual({ maxRecords: 100000, maxAgeMs: 604_800_000, maxBytes: 268435456 });
  });

  it('durableStreams.readCacheBytes: 64 MiB unless given, 0 turns it off, a bad one names the field', () => {
    expect(loadConfig({}, {}).durableStreams.readCacheBytes).toBe(64 * 1024 * 1024);
    const off = file('cache-off.yaml', 'durableStreams:\n  readCacheBytes: 0\n');
    expect(loadConfig({ config: off }, {}).durableStreams.readCacheBytes).toBe(0);
    for (const [value, error] of [
      ['-1', 'Too small: expected number to be >=0'],
      ['1.5', 'Invalid input: expected int, received number'],
      ['"big"', 'Invalid input: expected number, received string'],
      [String(16 * 1024 ** 3 + 1), 'Too big: expected number to be <=17179869184'],
    ]) {
      const p = file('cache-bad.yaml', `durableStreams:\n  readCacheBytes: ${value}\n`);
      expect(errorOf(() => loadConfig({ config: p }, {}))).toBe(
        `invalid configuration (${p}):\n  durableStreams.readCacheBytes: ${error}`,
      );
    }
  });

  it('rejects unparseable YAML and JSON with the file named', () => {
    const y = file('broken.yaml', 'port: [1\n');
    expect(errorOf(() => loadConfig({ config: y }, {}))).toMatch(
      new RegExp(`^config file ${y} is not valid YAML: `),
    );
    const j = file('broken.json', '{"port": ');
    expect(errorOf(() => loadConfig({ config: j }, {}))).toMatch(
      new RegExp(`^config file ${j} is not valid JSON: `),
    );
  });

  it('rejects a missing config file', () => {
    expect(errorOf(() => loadConfig({ config: join(dir, 'absent.yaml') }, {}))).toBe(
      `cannot read config file ${join(dir, 'absent.yaml')}: ENOENT`,
    );
  });

  it('rejects malformed flags and env', () => {
    expect(errorOf(() => loadConfig({ capsule: ['alpha'] }, {}))).toBe(
      'invalid configuration (--capsule): "alpha" must be ID=URL',
    );
    expect(errorOf(() => loadConfig({ port: 'x' }, {}))).toBe(
      'invalid configuration (--port): "x" is not a number',
    );
    expect(errorOf(() => loadConfig({}, { PORT: '' }))).toBe(
      'invalid configuration (PORT): "" is not a number',
    );
    expect(errorOf(() => loadConfig({}, { CAPSULES: 'a=ftp://x/' }))).toContain(
      'capsules[0].url: must be an http',
    );
  });
});
