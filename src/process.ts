/**
 * Runs the gateway as a process: logger, optional demo capsules, start, a banner saying where to
 * look, the drain on SIGTERM/SIGINT (exit 0 once drained), and on SIGHUP the config's capsules read
 * again (a door token rotated in the file or the environment takes effect without a restart).
 */
import type { GatewayConfig } from './config/schema.js';
import { startDemo, type Demo } from './demo.js';
import { startGateway } from './gateway.js';
import { createLogger } from './logger.js';
import { startTracing } from './tracing-sdk.js';

const banner = (base: string, capsules: string[], demo: boolean): string => {
  const first = capsules[0] ?? '<capsule>';
  const lines = [
    '',
    `murmur-gateway listening on ${base}${demo ? ' (demo: embedded store, simulated capsules)' : ''}`,
    `  capsules:        ${base}/capsules   (${capsules.join(', ') || 'none configured'})`,
    `  native Murmur:   curl -N ${base}/murmur/${first}/events`,
    `  long-poll JSON:  curl '${base}/murmur/${first}/poll?after=0&limit=20'`,
    `  BeeOS invoke:    curl -N -X POST ${base}/api/v1/agents/${first}/invoke -H 'Accept: text/event-stream' -H 'Content-Type: application/json' -d '{"message":"hello"}'`,
    `  Flue:            curl -X POST ${base}/flue/${first}/conv-1 -H 'Content-Type: application/json' -d '{"kind":"user","body":"hello"}'`,
    `                   curl '${base}/flue/${first}/conv-1?view=updates&offset=-1&live=long-poll'`,
    `  metrics:         ${base}/metrics`,
    '',
  ];
  return lines.join('\n');
};

export const runGatewayProcess = async (
  config: GatewayConfig,
  /** The configuration as it reads now (the file again); absent: SIGHUP is ignored. */
  reload?: () => GatewayConfig,
): Promise<void> => {
  const logger = createLogger(config.logLevel);
  // Off (and nothing of the SDK loaded) unless the standard OTEL_* environment names an endpoint.
  const tracing = await startTracing(process.env, logger);
  let demo: Demo | null = null;
  let effective = config;
  if (config.demo) {
    demo = await startDemo();
    effective = { ...config, capsules: [...config.capsules, ...demo.capsules] };
  }
  const gateway = await startGateway(effective, logger);
  process.stdout.write(
    banner(
      gateway.url,
      effective.capsules.map((c) => c.id),
      config.demo,
    ) + '\n',
  );

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
};
