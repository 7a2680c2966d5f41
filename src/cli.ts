#!/usr/bin/env node
/**
 * Command line: `murmur-gateway [flags]` runs the gateway; `murmur-gateway simulate [flags]` runs a
 * standalone capsule simulator. Flags are documented in docs/configuration.md and gateway-contract.md.
 */
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, type FlagValues } from './config/load.js';
import { runGatewayProcess } from './process.js';

const USAGE = `usage: murmur-gateway [--port N] [--host H] [--redis URL] [--capsule ID=URL]... [--config FILE]
                      [--public-url URL] [--demo] [--discover-running [DIR]]
       murmur-gateway simulate [--port P] [--host H] [--heartbeat-ms N] [--mode stateless|threaded]
                      [--acceptance none|single|queue] [--workload]`;

/** `--discover-running` takes an optional directory: a bare flag gets the default one. */
const DEFAULT_RUNNING_DIR = join(homedir(), '.murmur', 'running');
const withDiscoverDefault = (argv: string[]): string[] =>
  argv.flatMap((arg, i) =>
    arg === '--discover-running' && (argv[i + 1] === undefined || argv[i + 1]!.startsWith('--'))
      ? [`--discover-running=${DEFAULT_RUNNING_DIR}`]
      : [arg],
  );

const parseFlags = (argv: string[]): FlagValues | 'help' => {
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
      demo: { type: 'boolean' },
      'discover-running': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  return {
    port: values.port,
    host: values.host,
    redis: values.redis,
    capsule: values.capsule,
    config: values.config,
    publicUrl: values['public-url'],
    demo: values.demo,
    discoverRunning: values['discover-running'],
  };
};

const main = async (argv: string[]): Promise<void> => {
  if (argv[0] === 'simulate') {
    const { runSimulatorCli } = await import('./simulator/cli.js');
    await runSimulatorCli(argv.slice(1));
    return;
  }
  let flags: FlagValues | 'help';
  try {
    flags = parseFlags(argv);
  } catch (err) {
    process.stderr.write(`murmur-gateway: ${(err as Error).message}\n${USAGE}\n`);
    process.exit(2);
  }
  if (flags === 'help') {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  try {
    const config = loadConfig(flags, process.env);
    await runGatewayProcess(config, () => loadConfig(flags, process.env));
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`murmur-gateway: ${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
};

main(process.argv.slice(2)).catch((err: unknown) => {
  process.stderr.write(`murmur-gateway: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
