/**
 * Runs the gateway as a process: logger, optional demo capsules, start, a banner saying where to
 * look, the drain on SIGTERM/SIGINT (exit 0 once drained), and on SIGHUP the config's capsules read
 * again (a door token rotated in the file or the environment takes effect without a restart).
 */
import cluster from 'node:cluster';
import type { Deprecation } from './config/deprecated-keys.js';
import { ConfigError } from './config/load.js';
import type { GatewayConfig } from './config/schema.js';
import { startDemo, type Demo } from './demo.js';
import { startGateway } from './gateway.js';
import { createLogger, type LogFormat } from './logger.js';
import { installProcessGuard } from './http/unexpected-errors.js';
import { startTracing } from './tracing-sdk.js';
import { joinHostMetrics } from './http/host-metrics.js';
import { packageVersion } from './version.js';
import { runPrimary, workerCount, workersRefusal } from './workers.js';

/**
 * Origins the demo lets read cross-origin: pages served from this machine (any port), so the
 * README's browser snippet works as written; a page from anywhere else is still refused.
 */
export const DEMO_CORS_ORIGINS = ['http://localhost:*', 'http://127.0.0.1:*', 'http://[::1]:*'];

const banner = (base: string, capsules: string[], demo: boolean, store: string, workers = 1): string => {
  const first = capsules[0] ?? '<capsule>';
  const lines = [
    '',
    // Scripts wait for "murmur-gateway listening on": the version follows the address.
    `murmur-gateway listening on ${base} (${packageVersion()}${demo ? `; demo: ${store}, simulated capsules` : ''}${workers > 1 ? `; ${workers} workers` : ''})`,
    `  dashboard:        ${base}/dashboard/`,
    `  capsules:         ${base}/capsules   (${capsules.join(', ') || 'none configured'})`,
    `  native Murmur:    curl -N ${base}/murmur/${first}/events`,
    `  long-poll JSON:   curl '${base}/murmur/${first}/poll?after=0&limit=20'`,
    `  Durable Streams:  curl -N '${base}/v1/stream/murmur/${first}?offset=-1&live=sse'`,
    `  BeeOS invoke:     curl -N -X POST ${base}/api/v1/agents/${first}/invoke -H 'Accept: text/event-stream' -H 'Content-Type: application/json' -d '{"message":"hello"}'`,
    `  Flue:             curl -X POST ${base}/flue/${first}/conv-1 -H 'Content-Type: application/json' -d '{"kind":"user","body":"hello"}'`,
    `                    curl -N '${base}/flue/${first}/conv-1?view=updates&offset=-1&live=sse'`,
    `  metrics:          ${base}/metrics`,
    `  stop:             Ctrl-C (drains open streams, then exits)`,
    '',
  ];
  return lines.join('\n');
};

/**
 * A listen that failed for a reason the user fixes with a flag, as one line; null for anything else.
 * (The server's own error carries a stack that says nothing to someone whose port is taken.)
 */
export const listenFailure = (err: unknown): string | null => {
  const e = err as NodeJS.ErrnoException & { address?: string; port?: number };
  if (e?.syscall !== 'listen') return null;
  const where = `${e.address?.includes(':') ? `[${e.address}]` : (e.address ?? '')}:${e.port ?? ''}`;
  switch (e.code) {
    case 'EADDRINUSE':
      return `cannot listen on ${where}: the port is in use (another gateway or demo?); choose another with --port N`;
    case 'EACCES':
      return `cannot listen on ${where}: permission denied (ports below 1024 need privileges); choose another with --port N`;
    case 'EADDRNOTAVAIL':
      return `cannot listen on ${where}: no such address on this host; choose another with --host H`;
    default:
      return null;
  }
};

export interface ProcessOptions {
  /** pretty or json (default json). */
  logFormat?: LogFormat;
  /** The configuration as it reads now (the file again); absent: SIGHUP is ignored. */
  reload?: () => GatewayConfig;
  /** Old config keys the file used: one warning each at start (by the primary only). */
  deprecations?: readonly Deprecation[];
}

export const runGatewayProcess = async (
  config: GatewayConfig,
  options: ProcessOptions = {},
): Promise<void> => {
  const { reload } = options;
  const logger = createLogger(config.logLevel, options.logFormat);
  installProcessGuard(logger);
  if (!cluster.isWorker) for (const d of options.deprecations ?? []) logger.warn(d.message);
  const workers = workerCount(config.server.workers);
  if (cluster.isPrimary && workers > 1) {
    const refusal = workersRefusal(config, workers);
    if (refusal) throw new ConfigError(`invalid configuration: ${refusal}`);
    const { port } = await runPrimary(workers, logger).listening.catch((code: number) => process.exit(code));
    const { host: bound, tls } = config.server;
    const host = bound === '0.0.0.0' || bound === '::' ? '127.0.0.1' : bound;
    const base = `${tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`;
    process.stdout.write(
      banner(
        base,
        config.capsules.map((c) => c.id),
        false,
        'Redis',
        workers,
      ) + '\n',
    );
    return;
  }
  // A worker: its /metrics answers for the host, and the primary prints the one banner.
  const worker = cluster.isWorker;
  if (worker) joinHostMetrics();
  // Off (and nothing of the SDK loaded) unless the standard OTEL_* environment names an endpoint.
  const tracing = await startTracing(process.env, logger);
  let demo: Demo | null = null;
  let effective = config;
  if (config.demo) {
    demo = await startDemo();
    effective = {
      ...config,
      capsules: [...config.capsules, ...demo.capsules],
      server: {
        ...config.server,
        cors: { ...config.server.cors, origins: [...config.server.cors.origins, ...DEMO_CORS_ORIGINS] },
      },
    };
  }
  const gateway = await startGateway(effective, logger, demo?.tuning);
  // The demo's capsules start working only once they are watched: a fresh demo shows no loss.
  await demo?.startWhenWatched(gateway.upstreams);
  let draining = false;
  const drain = (signal: string): void => {
    if (draining) return;
    draining = true;
    logger.info({ signal }, 'draining');
    void (async () => {
      await gateway.close();
      await demo?.stop();
      await tracing?.shutdown();
      logger.info('drained');
      process.exit(0);
    })().catch((err: unknown) => {
      logger.error({ err }, 'drain failed');
      process.exit(1);
    });
  };
  if (reload) {
    process.on('SIGHUP', () => {
      let next: GatewayConfig;
      try {
        next = reload();
      } catch (err) {
        // A broken edit keeps what runs: say why, change nothing.
        logger.error({ err: (err as Error).message }, 'SIGHUP: configuration not reloaded');
        return;
      }
      void gateway.reloadCapsules(next.capsules).then(
        (changed) => logger.info({ changed }, 'SIGHUP: capsules reloaded'),
        (err: unknown) => logger.error({ err: (err as Error).message }, 'SIGHUP: capsules not reloaded'),
      );
    });
  }
  process.once('SIGTERM', () => drain('SIGTERM'));
  process.once('SIGINT', () => drain('SIGINT'));
  // The banner last: whoever reads it may signal at once, and a signal with no handler yet would
  // kill the process instead of draining it.
  if (worker) return;
  process.stdout.write(
    banner(
      gateway.url,
      effective.capsules.map((c) => c.id),
      config.demo,
      config.store.redis ? 'Redis' : 'embedded store',
    ) + '\n',
  );
};
