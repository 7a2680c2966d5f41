/**
 * Config keys of earlier releases, still accepted: before validation each is moved to its place in
 * the grouped layout (schema.ts), a value in seconds or days converted to milliseconds, and one
 * deprecation warning per old key given says where it went. When a file gives both the old key and
 * its new place, the new one is used and the old one ignored (the warning says so).
 */

/** One old key: a dotted path in the old layout, its dotted path now, and how its value converts. */
export interface DeprecatedKey {
  from: string;
  to: string;
  /** Multiply a number by this (seconds → milliseconds: 1000); absent = the value as it is. */
  scale?: number;
  /** The old unit, said in the warning when the value is converted. */
  unit?: 'seconds' | 'days';
}

const SECONDS = { scale: 1000, unit: 'seconds' } as const;
const DAYS = { scale: 86_400_000, unit: 'days' } as const;

/** Every old key, in the order they are applied (a key nested in a moved group before the group). */
export const DEPRECATED_KEYS: readonly DeprecatedKey[] = [
  { from: 'port', to: 'server.port' },
  { from: 'host', to: 'server.host' },
  { from: 'publicUrl', to: 'server.publicUrl' },
  { from: 'workers', to: 'server.workers' },
  { from: 'tls', to: 'server.tls' },
  { from: 'http2', to: 'server.http2' },
  { from: 'cors', to: 'server.cors' },
  { from: 'trustProxy', to: 'server.trustProxy' },
  { from: 'bodyLimitBytes', to: 'server.bodyLimitBytes' },
  { from: 'limits.headersTimeoutSeconds', to: 'server.headersTimeoutMs', ...SECONDS },
  { from: 'limits.bodyTimeoutSeconds', to: 'server.bodyTimeoutMs', ...SECONDS },
  { from: 'heartbeatSeconds', to: 'downstream.heartbeatMs', ...SECONDS },
  { from: 'longPollSeconds', to: 'downstream.longPollMaxMs', ...SECONDS },
  { from: 'idleControlSeconds', to: 'downstream.idleControlMs', ...SECONDS },
  { from: 'maxQueuedRecords', to: 'downstream.maxQueuedRecords' },
  { from: 'liveness.downstream.keepAliveMs', to: 'downstream.keepAliveMs' },
  { from: 'liveness.downstream.writeStallMs', to: 'downstream.writeStallMs' },
  { from: 'redis', to: 'store.redis' },
  { from: 'retention.maxRecords', to: 'store.retention.maxRecords' },
  { from: 'retention.maxAgeSeconds', to: 'store.retention.maxAgeMs', ...SECONDS },
  { from: 'retention.maxBytes', to: 'store.retention.maxBytes' },
  { from: 'liveness.store.commandTimeoutMs', to: 'store.commandTimeoutMs' },
  { from: 'liveness.store.probeMs', to: 'store.probeMs' },
  { from: 'liveness.store.unreachableAfterMs', to: 'store.unreachableAfterMs' },
  { from: 'maxPendingAppends', to: 'store.maxPendingEntries' },
  { from: 'maxPendingBytes', to: 'store.maxPendingBytes' },
  { from: 'appendLingerMs', to: 'store.appendLingerMs' },
  { from: 'liveness.upstream.keepAliveMs', to: 'upstream.keepAliveMs' },
  { from: 'liveness.upstream.connectTimeoutMs', to: 'upstream.connectTimeoutMs' },
  { from: 'liveness.upstream.heartbeatMs', to: 'upstream.heartbeatMs' },
  { from: 'liveness.upstream.heartbeatMisses', to: 'upstream.heartbeatMisses' },
  { from: 'liveness.upstream.giveUpAfterMs', to: 'upstream.giveUpAfterMs' },
  { from: 'liveness.upstream.giveUpCooldownMs', to: 'upstream.giveUpCooldownMs' },
  { from: 'replicaId', to: 'fleet.replicaId' },
  { from: 'lease', to: 'fleet.lease' },
  { from: 'discoverRunning', to: 'fleet.discoverRunning' },
  { from: 'apiKeys', to: 'auth.apiKeys' },
  { from: 'jwt', to: 'auth.jwt' },
  { from: 'adminTokens', to: 'auth.adminTokens' },
  { from: 'auth.ticketTtlSeconds', to: 'auth.ticketTtlMs', ...SECONDS },
  { from: 'queue.retryAfterSeconds', to: 'queue.retryAfterMs', ...SECONDS },
  { from: 'submitStoreTimeoutSeconds', to: 'queue.storeTimeoutMs', ...SECONDS },
  { from: 'durableStreams.webhooks.allowLoopback', to: 'webhooks.allowLoopback' },
  { from: 'durableStreams.webhooks.allowHosts', to: 'webhooks.allowHosts' },
  { from: 'durableStreams.webhooks.timeoutSeconds', to: 'webhooks.timeoutMs', ...SECONDS },
  {
    from: 'durableStreams.subscriptions.replayWindowSeconds',
    to: 'durableStreams.subscriptions.replayWindowMs',
    ...SECONDS,
  },
  {
    from: 'durableStreams.subscriptions.keyRotationDays',
    to: 'durableStreams.subscriptions.keyRotationMs',
    ...DAYS,
  },
];

/** Groups of the old layout that only held moved keys: dropped once the moves left them empty. */
const OLD_GROUPS = [
  'liveness.store',
  'liveness.upstream',
  'liveness.downstream',
  'liveness',
  'retention',
  'durableStreams.webhooks',
];

export interface Deprecation {
  from: string;
  to: string;
  /** Both were given: the value at `to` was kept, the one at `from` ignored. */
  ignored: boolean;
  message: string;
}

export interface Migrated {
  /** The input in the new layout (a copy: the input is left as it was). */
  config: Record<string, unknown>;
  /** One per old key given, in table order. */
  deprecations: Deprecation[];
}

type Node = Record<string, unknown>;

const isNode = (v: unknown): v is Node => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A copy of every mapping on the way (arrays and leaves shared: nothing below them is edited). */
const copyTree = (v: unknown): unknown =>
  isNode(v) ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, copyTree(x)])) : v;

const parentOf = (root: Node, path: string[], create: boolean): Node | undefined => {
  let node: Node = root;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (isNode(next)) node = next;
    else if (create && next === undefined) node = node[key] = {};
    else return undefined;
  }
  return node;
};

const has = (root: Node, path: string[]): boolean => {
  const parent = parentOf(root, path, false);
  return parent !== undefined && Object.hasOwn(parent, path.at(-1)!);
};

/** `value * scale` without binary noise (1.1 s is 1100 ms, not 1100.0000000000002). */
const scaled = (value: number, scale: number): number => {
  const exact = value * scale;
  return Math.abs(exact - Math.round(exact)) < 1e-6 ? Math.round(exact) : exact;
};

/** The warning for one old key, as logged at start. */
const deprecationMessage = (key: DeprecatedKey, ignored: boolean): string =>
  `config key "${key.from}" is deprecated: use "${key.to}"` +
  (key.unit ? ` (milliseconds; "${key.from}" was in ${key.unit})` : '') +
  (ignored ? `; both are given, so "${key.to}" is used and "${key.from}" ignored` : '');

/** Moves every old key of `input` to its new place (see the module comment). */
export const migrateDeprecatedKeys = (input: Record<string, unknown>): Migrated => {
  const config = copyTree(input) as Node;
  const deprecations: Deprecation[] = [];
  for (const key of DEPRECATED_KEYS) {
    const from = key.from.split('.');
    if (!has(config, from)) continue;
    const parent = parentOf(config, from, false)!;
    const value = parent[from.at(-1)!];
    delete parent[from.at(-1)!];
    const to = key.to.split('.');
    const ignored = has(config, to);
    if (!ignored) {
      const target = parentOf(config, to, true);
      // A new group given as something other than a mapping: left for the schema to name.
      if (target)
        target[to.at(-1)!] = key.scale && typeof value === 'number' ? scaled(value, key.scale) : value;
    }
    deprecations.push({ from: key.from, to: key.to, ignored, message: deprecationMessage(key, ignored) });
  }
  for (const group of OLD_GROUPS) {
    const path = group.split('.');
    const parent = parentOf(config, path, false);
    const node = parent?.[path.at(-1)!];
    if (isNode(node) && Object.keys(node).length === 0) delete parent![path.at(-1)!];
  }
  return { config, deprecations };
};
