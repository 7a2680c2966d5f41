/**
 * `murmur-gateway simulate …`: run one simulated capsule as a standalone process (argument parsing
 * and signal handling). The main CLI dispatches here; the capsule itself is index.ts.
 */
import { SIM_RELEASES } from './release-line.js';
import { startSimulator, type SimulatedCapsule, type SimulatorOptions } from './index.js';
import { startWorkload } from './workload.js';

const SIMULATE_USAGE = `usage: murmur-gateway simulate [--port P] [--host H] [--heartbeat-ms N]
  [--mode stateless|threaded] [--acceptance none|single|queue] [--buffer-size N]
  [--connection-queue N] [--door-token T] [--frame-delay-ms N] [--release spec|0.4|0.5|0.6|1.0]
  [--workload] [--seed N]`;

export interface SimulateArgs {
  options: SimulatorOptions;
  workload: boolean;
  seed: number;
}

const intArg = (flag: string, v: string | undefined): number => {
  if (v === undefined || !/^[0-9]+$/.test(v))
    throw new Error(`${flag} needs a non-negative integer, got ${v ?? 'nothing'}`);
  return Number(v);
};

const oneOf = <T extends string>(flag: string, v: string | undefined, allowed: readonly T[]): T => {
  if (v === undefined || !(allowed as readonly string[]).includes(v)) {
    throw new Error(`${flag} must be one of ${allowed.join('|')}, got ${v ?? 'nothing'}`);
  }
  return v as T;
};

/** Parse `simulate` arguments; throws an Error naming the bad flag. */
export const parseSimulateArgs = (argv: string[]): SimulateArgs => {
  const options: SimulatorOptions = {};
  let workload = false;
  let seed = 1;
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const next = (): string | undefined => argv[++i];
    switch (flag) {
      case '--port':
        options.port = intArg(flag, next());
        break;
      case '--host':
        options.host = next() ?? '127.0.0.1';
        break;
      case '--heartbeat-ms':
        options.heartbeatMs = Math.max(1, intArg(flag, next()));
        break;
      case '--mode':
        options.conversationMode = oneOf(flag, next(), ['stateless', 'threaded'] as const);
        break;
      case '--acceptance':
        options.taskAcceptance = oneOf(flag, next(), ['none', 'single', 'queue'] as const);
        break;
      case '--buffer-size':
        options.bufferSize = intArg(flag, next());
        break;
      case '--connection-queue':
        options.connectionQueue = Math.max(1, intArg(flag, next()));
        break;
      case '--door-token':
        options.doorToken = next() ?? null;
        break;
      case '--release':
        options.release = oneOf(flag, next(), SIM_RELEASES);
        break;
      case '--frame-delay-ms':
        options.frameDelayMs = intArg(flag, next());
        break;
      case '--workload':
        workload = true;
        break;
      case '--seed':
        seed = intArg(flag, next());
        break;
      default:
        throw new Error(`unknown argument ${flag ?? ''}\n${SIMULATE_USAGE}`);
    }
  }
  return { options, workload, seed };
};

/** Start a simulated capsule from CLI arguments; stops on SIGINT/SIGTERM. Resolves once listening. */
export const runSimulatorCli = async (argv: string[]): Promise<SimulatedCapsule> => {
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(`${SIMULATE_USAGE}\n`);
    process.exit(0);
  }
  const args = parseSimulateArgs(argv);
  // A demo workload needs visible pacing; echo tasks have no delayMs of their own.
  if (args.workload && args.options.frameDelayMs === undefined) args.options.frameDelayMs = 120;
  const capsule = await startSimulator(args.options);
  const workload = args.workload ? startWorkload(capsule, { seed: args.seed }) : null;
  process.stdout.write(
    `${JSON.stringify({ url: capsule.url, session: capsule.session, workload: args.workload })}\n`,
  );
  const shutdown = (): void => {
    workload?.stop();
    void capsule.stop().then(() => process.exit(0));
  };
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
  return capsule;
};
