#!/usr/bin/env node
/**
 * Command line: `murmur-gateway [flags]` runs the gateway; `murmur-gateway simulate [flags]` runs a
 * standalone capsule simulator. `--help` lists every flag, variable and default; docs/configuration.md
 * has every setting of the config file.
 */
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, readConfig, type FlagValues } from './config/load.js';
import { LOG_FORMATS, type LogFormat } from './logger.js';
import { listenFailure, runGatewayProcess } from './process.js';
import { packageVersion } from './version.js';

/** `--discover-running` takes an optional directory: a bare flag gets the default one. */
const DEFAULT_RUNNING_DIR = join(homedir(), '.murmur', 'running');

const USAGE = `usage: murmur-gateway [flags]            run the gateway
       murmur-gateway simulate [flags]   run one simulated capsule (murmur-gateway simulate --help)`;

const HELP = `${USAGE}

Flags override the environment, which overrides the config file. Every setting: docs/configuration.md
(grouped by concern: server, downstream, store, upstream, fleet, auth, limits, queue, …; durations in
milliseconds; a key of an earlier release is still read, with a warning naming its new place).

  flag                       environment                  default
  --port N                   PORT                         8080 (0: any free port)
  --host H                   HOST                         127.0.0.1; 0.0.0.0 once credentials are configured
  --redis URL                REDIS_URL                    none: the embedded in-memory store (nothing survives a restart)
                             REDIS_CLUSTER=URL,URL…       a Redis Cluster, by its nodes
                             REDIS_SENTINELS=URL,URL…     Sentinel, with REDIS_SENTINEL_NAME, REDIS_PASSWORD,
                                                          REDIS_SENTINEL_PASSWORD
  --capsule ID=URL (repeat)  CAPSULES=ID=URL,ID=URL       none
                             MURMUR_DOOR_TOKEN_<ID>       a capsule's door token (MURMUR_DOOR_TOKEN: every capsule's)
  --config FILE              GATEWAY_CONFIG               none (YAML, or JSON by its .json name)
  --public-url URL           PUBLIC_URL                   derived from each request
  --tls-cert FILE            TLS_CERT                     none: plain HTTP (with --tls-key: HTTPS, HTTP/2 and 1.1)
  --tls-key FILE             TLS_KEY                      none (the certificate's PEM private key)
  --discover-running [DIR]                                off; a bare flag: ${DEFAULT_RUNNING_DIR}
  --demo                                                  off: simulated capsules, one per release line
  --log-level LEVEL          LOG_LEVEL                    info (fatal|error|warn|info|debug|trace|silent)
  --log-format FORMAT        LOG_FORMAT                   pretty on a terminal, else json (pretty|json)
  --workers N|auto           WORKERS                      1 (auto: one per core; more than 1 needs --redis)
                             REPLICA_ID                   <hostname>-<pid> (this replica's id in a fleet)
                             GATEWAY_ADMIN_TOKEN          none (the admin API stays off)
                             GATEWAY_CONCURRENT_MARKING   auto (on|off): the launcher's V8 marking choice
                             GATEWAY_NODE_FLAGS           none: node flags the launcher adds
  --version                                               print the version and exit
  -h, --help                                              print this and exit

Signals: SIGTERM or SIGINT drains and exits 0; SIGHUP reads the capsules (and door tokens) again.
Exit status: 0 drained, 1 failed, 2 bad flags, bad configuration or the port is not available.`;

const withDiscoverDefault = (argv: string[]): string[] =>
  argv.flatMap((arg, i) =>
    arg === '--discover-running' && (argv[i + 1] === undefined || argv[i + 1]!.startsWith('--'))
      ? [`--discover-running=${DEFAULT_RUNNING_DIR}`]
      : [arg],
  );

type Parsed = { flags: FlagValues; logFormat?: string } | 'help' | 'version';

const parseFlags = (argv: string[]): Parsed => {
  const { values } = parseArgs({
    args: withDiscoverDefault(argv),
    strict: true,
    allowPositionals: false,
    options: {
      port: { type: 'string' },
      host: { type: 'string' },
      redis: { type: 'string' },
      capsule: { type: 'string', multiple: true },
      config: { type: 'string' },
      'public-url': { type: 'string' },
      'tls-cert': { type: 'string' },
      workers: { type: 'string' },
      'tls-key': { type: 'string' },
      demo: { type: 'boolean' },
      'discover-running': { type: 'string' },
      'log-level': { type: 'string' },
      'log-format': { type: 'string' },
      version: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  if (values.version) return 'version';
  return {
    flags: {
      port: values.port,
      host: values.host,
      redis: values.redis,
      capsule: values.capsule,
      config: values.config,
      publicUrl: values['public-url'],
      tlsCert: values['tls-cert'],
      workers: values.workers,
      tlsKey: values['tls-key'],
      demo: values.demo,
      discoverRunning: values['discover-running'],
      logLevel: values['log-level'],
    },
    logFormat: values['log-format'],
  };
};

/** The flag, else LOG_FORMAT, else pretty for a person at a terminal and json for everything else. */
const logFormatOf = (flag: string | undefined, env: NodeJS.ProcessEnv): LogFormat => {
  const [value, origin] =
    flag !== undefined ? [flag, '--log-format'] : [env.LOG_FORMAT || undefined, 'LOG_FORMAT'];
  if (value === undefined) return process.stdout.isTTY ? 'pretty' : 'json';
  if (!(LOG_FORMATS as readonly string[]).includes(value))
    throw new ConfigError(`invalid configuration (${origin}): "${value}" must be pretty or json`);
  return value as LogFormat;
};

const main = async (argv: string[]): Promise<void> => {
  if (argv[0] === 'simulate') {
    const { runSimulatorCli } = await import('./simulator/cli.js');
    await runSimulatorCli(argv.slice(1));
    return;
  }
  let parsed: Parsed;
  try {
    parsed = parseFlags(argv);
  } catch (err) {
    process.stderr.write(`murmur-gateway: ${(err as Error).message}\n${USAGE}\n`);
    process.exit(2);
  }
  if (parsed === 'help') {
    process.stdout.write(`${HELP}\n`);
    return;
  }
  if (parsed === 'version') {
    process.stdout.write(`murmur-gateway ${packageVersion()}\n`);
    return;
  }
  const { flags } = parsed;
  try {
    const logFormat = logFormatOf(parsed.logFormat, process.env);
    const { config, deprecations } = readConfig(flags, process.env);
    await runGatewayProcess(config, {
      logFormat,
      deprecations,
      reload: () => loadConfig(flags, process.env),
    });
  } catch (err) {
    const failure = err instanceof ConfigError ? err.message : listenFailure(err);
    if (failure !== null) {
      process.stderr.write(`murmur-gateway: ${failure}\n`);
      process.exit(2);
    }
    throw err;
  }
};

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`murmur-gateway: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
