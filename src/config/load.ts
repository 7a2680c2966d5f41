/**
 * Builds the configuration from a file (YAML or JSON), the environment and CLI flags, in rising
 * precedence, then validates it once. Any problem becomes one ConfigError naming the field.
 */
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { sha256Hex } from '../auth/admin-token.js';
import { migrateDeprecatedKeys, type Deprecation } from './deprecated-keys.js';
import { configSchema, type GatewayConfig } from './schema.js';

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** Flag values as parsed from argv; undefined = not given. */
export interface FlagValues {
  port?: string;
  host?: string;
  redis?: string;
  capsule?: string[];
  config?: string;
  publicUrl?: string;
  demo?: boolean;
  /** A directory (the CLI fills in the default when the flag has no value). */
  discoverRunning?: string;
  logLevel?: string;
  /** PEM files: both, or neither (one alone is a configuration error). */
  tlsCert?: string;
  tlsKey?: string;
  /** `N` or `auto`. */
  workers?: string;
}

const describePath = (path: PropertyKey[]): string =>
  path.length === 0
    ? '(root)'
    : path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i ? '.' : ''}${String(p)}`)).join('');

/**
 * One line per bad field, naming it: `capsules[0].url: must be an http:// or https:// URL`; a field
 * given under an old key says which (`downstream.heartbeatMs (given as heartbeatSeconds): …`).
 */
const formatIssues = (
  issues: z.core.$ZodIssue[],
  source: string,
  deprecations: readonly Deprecation[] = [],
): string => {
  const givenAs = (field: string): string => {
    const old = deprecations.find(
      (d) => !d.ignored && (field === d.to || field.startsWith(`${d.to}.`) || field.startsWith(`${d.to}[`)),
    );
    return old ? ` (given as ${old.from})` : '';
  };
  const byField = new Map<string, string>();
  for (const i of issues) {
    const field = describePath(i.path);
    if (!byField.has(field)) byField.set(field, i.message);
  }
  return (
    `invalid configuration (${source}):\n` +
    [...byField].map(([f, m]) => `  ${f}${givenAs(f)}: ${m}`).join('\n')
  );
};

/** `ID=URL` → {id, url}; the URL itself is validated by the schema. */
const parseCapsulePair = (pair: string, origin: string): { id: string; url: string } => {
  const eq = pair.indexOf('=');
  if (eq <= 0) throw new ConfigError(`invalid configuration (${origin}): "${pair}" must be ID=URL`);
  return { id: pair.slice(0, eq).trim(), url: pair.slice(eq + 1).trim() };
};

const parseNumber = (value: string, origin: string): number => {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n)) {
    throw new ConfigError(`invalid configuration (${origin}): "${value}" is not a number`);
  }
  return n;
};

const readConfigFile = (file: string): Record<string, unknown> => {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(
      `cannot read config file ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
    );
  }
  let parsed: unknown;
  try {
    parsed = /\.json$/i.test(file) ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new ConfigError(
      `config file ${file} is not valid ${/\.json$/i.test(file) ? 'JSON' : 'YAML'}: ${(err as Error).message.split('\n')[0]}`,
    );
  }
  if (parsed === null || parsed === undefined) return {};
  if (typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new ConfigError(`invalid configuration (${file}): (root): must be a mapping of settings`);
  }
  return parsed as Record<string, unknown>;
};

const list = (value: string): string[] =>
  value
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== '');

/**
 * REDIS_URL, or REDIS_CLUSTER (comma-separated node URLs), or REDIS_SENTINELS (comma-separated
 * sentinel URLs) with REDIS_SENTINEL_NAME and optional REDIS_PASSWORD / REDIS_SENTINEL_PASSWORD:
 * the three `redis` forms for deployments configured by environment alone. At most one of them.
 */
const readRedisEnv = (env: NodeJS.ProcessEnv): unknown => {
  const given = (['REDIS_URL', 'REDIS_CLUSTER', 'REDIS_SENTINELS'] as const).filter(
    (k) => env[k] !== undefined && env[k]!.trim() !== '',
  );
  if (given.length > 1) {
    throw new ConfigError(`invalid configuration (${given.join(', ')}): set only one of them`);
  }
  if (env.REDIS_URL && env.REDIS_URL.trim() !== '') return env.REDIS_URL;
  if (env.REDIS_CLUSTER && env.REDIS_CLUSTER.trim() !== '') return { cluster: list(env.REDIS_CLUSTER) };
  if (env.REDIS_SENTINELS && env.REDIS_SENTINELS.trim() !== '') {
    return {
      sentinels: list(env.REDIS_SENTINELS),
      name: env.REDIS_SENTINEL_NAME,
      ...(env.REDIS_PASSWORD ? { password: env.REDIS_PASSWORD } : {}),
      ...(env.REDIS_SENTINEL_PASSWORD ? { sentinelPassword: env.REDIS_SENTINEL_PASSWORD } : {}),
    };
  }
  return undefined;
};

/** `MURMUR_DOOR_TOKEN_<ID>` (id upper-cased, other characters `_`): one capsule's door token. */
const doorTokenEnvName = (id: string): string =>
  `MURMUR_DOOR_TOKEN_${id.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;

/**
 * Door tokens from the environment, for capsules the file or flags gave none: the capsule's own
 * variable, else `MURMUR_DOOR_TOKEN` (the runtime CLI's name) for all of them.
 */
const withEnvDoorTokens = (capsules: unknown[], env: NodeJS.ProcessEnv): unknown[] =>
  capsules.map((c) => {
    if (typeof c !== 'object' || c === null) return c;
    const entry = c as Record<string, unknown>;
    if (entry.doorToken !== undefined || typeof entry.id !== 'string') return c;
    const token = env[doorTokenEnvName(entry.id)] ?? env.MURMUR_DOOR_TOKEN;
    return token !== undefined && token.trim() !== '' ? { ...entry, doorToken: token.trim() } : c;
  });

/** `auto`, or a whole number (the schema bounds it). */
const parseWorkers = (value: string, origin: string): number | 'auto' =>
  value === 'auto' ? 'auto' : parseNumber(value, origin);

/** `group.key = value` on the merged input, making the group when the file had none. */
const setIn = (merged: Record<string, unknown>, group: string, key: string, value: unknown): void => {
  const node = merged[group];
  // A group that is not a mapping is left for the schema to name.
  if (node === undefined) merged[group] = { [key]: value };
  else if (typeof node === 'object' && node !== null && !Array.isArray(node))
    (node as Record<string, unknown>)[key] = value;
};

const getIn = (merged: Record<string, unknown>, group: string, key: string): unknown => {
  const node = merged[group];
  return typeof node === 'object' && node !== null ? (node as Record<string, unknown>)[key] : undefined;
};

export interface LoadedConfig {
  config: GatewayConfig;
  /** Old keys the file used, each with its warning (logged once at start). */
  deprecations: Deprecation[];
}

/**
 * Merge file < env < flags and validate. The file's old keys are moved to their places first
 * (deprecated-keys.ts); env and flags then set the new places. `env` is passed in (not read from
 * process.env here) so tests can supply their own.
 */
export const readConfig = (flags: FlagValues, env: NodeJS.ProcessEnv): LoadedConfig => {
  const file = flags.config ?? env.GATEWAY_CONFIG;
  const { config: merged, deprecations } = migrateDeprecatedKeys(file ? readConfigFile(file) : {});
  // What env and flags set is theirs, not the old key's: an error there is not "given as" it.
  const overridden = new Set<string>();
  const set = (group: string, key: string, value: unknown): void => {
    overridden.add(`${group}.${key}`);
    setIn(merged, group, key, value);
  };

  if (env.PORT !== undefined) set('server', 'port', parseNumber(env.PORT, 'PORT'));
  if (env.HOST !== undefined) set('server', 'host', env.HOST);
  const redisFromEnv = readRedisEnv(env);
  if (redisFromEnv !== undefined) set('store', 'redis', redisFromEnv);
  if (env.PUBLIC_URL !== undefined && env.PUBLIC_URL !== '') set('server', 'publicUrl', env.PUBLIC_URL);
  // Both or neither: one of them alone is a configuration error the schema names.
  if (env.TLS_CERT || env.TLS_KEY) set('server', 'tls', { cert: env.TLS_CERT ?? '', key: env.TLS_KEY ?? '' });
  if (env.CAPSULES !== undefined && env.CAPSULES.trim() !== '') {
    merged.capsules = env.CAPSULES.split(',').map((p) => parseCapsulePair(p, 'CAPSULES'));
  }

  if (env.REPLICA_ID !== undefined && env.REPLICA_ID !== '') set('fleet', 'replicaId', env.REPLICA_ID);
  if (env.LOG_LEVEL !== undefined && env.LOG_LEVEL !== '') merged.logLevel = env.LOG_LEVEL;
  if (env.WORKERS !== undefined && env.WORKERS !== '')
    set('server', 'workers', parseWorkers(env.WORKERS, 'WORKERS'));

  if (env.GATEWAY_ADMIN_TOKEN !== undefined && env.GATEWAY_ADMIN_TOKEN.trim() !== '') {
    // Only the hash is kept: the clear token never reaches the configuration or a log line.
    const hashed = { sha256: sha256Hex(env.GATEWAY_ADMIN_TOKEN.trim()) };
    const given = getIn(merged, 'auth', 'adminTokens');
    set('auth', 'adminTokens', [...(Array.isArray(given) ? given : []), hashed]);
  }

  if (flags.port !== undefined) set('server', 'port', parseNumber(flags.port, '--port'));
  if (flags.host !== undefined) set('server', 'host', flags.host);
  if (flags.redis !== undefined) set('store', 'redis', flags.redis);
  if (flags.publicUrl !== undefined) set('server', 'publicUrl', flags.publicUrl);
  if (flags.tlsCert !== undefined || flags.tlsKey !== undefined)
    set('server', 'tls', { cert: flags.tlsCert ?? '', key: flags.tlsKey ?? '' });
  if (flags.demo) merged.demo = true;
  if (flags.logLevel !== undefined) merged.logLevel = flags.logLevel;
  if (flags.workers !== undefined) set('server', 'workers', parseWorkers(flags.workers, '--workers'));
  if (flags.discoverRunning !== undefined) set('fleet', 'discoverRunning', flags.discoverRunning);
  if (flags.capsule && flags.capsule.length > 0) {
    // Flags replace the capsule list but keep door tokens the file gave the same ids.
    const fromFile = new Map(
      (Array.isArray(merged.capsules) ? (merged.capsules as Record<string, unknown>[]) : []).map((c) => [
        c.id,
        c,
      ]),
    );
    merged.capsules = flags.capsule.map((p) => ({
      ...fromFile.get(parseCapsulePair(p, '--capsule').id),
      ...parseCapsulePair(p, '--capsule'),
    }));
  }

  if (Array.isArray(merged.capsules)) merged.capsules = withEnvDoorTokens(merged.capsules, env);

  const result = configSchema.safeParse(merged);
  if (!result.success)
    throw new ConfigError(
      formatIssues(
        result.error.issues,
        file ?? 'flags and environment',
        deprecations.filter((d) => !overridden.has(d.to)),
      ),
    );
  return { config: result.data, deprecations };
};

/** readConfig without the deprecations (a reload: they were logged at start). */
export const loadConfig = (flags: FlagValues, env: NodeJS.ProcessEnv): GatewayConfig =>
  readConfig(flags, env).config;
