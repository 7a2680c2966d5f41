/**
 * Every core of a host (`--workers N|auto`): the primary forks N workers, each a full replica of the
 * fleet (its own lease participation, hub and upstream watches) listening on the one port through
 * node:cluster, which hands each new connection to a worker in turn. The log is Redis, shared by
 * all, so a capsule is ingested by one worker and served by every one, exactly as across hosts.
 *
 * - A worker that dies is started again under the same index; its capsules fail over to the other
 *   workers (their leases), as when a replica dies, so no record is lost.
 * - SIGTERM or SIGINT drains every worker (each ends its streams with their protocols' signals and
 *   exits 0), then the primary exits 0.
 * - `/metrics` on any worker answers the host: the primary gathers every worker's exposition and
 *   merges them with a `worker` label (http/host-metrics.ts).
 */
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import type { Logger } from 'pino';
import type { GatewayConfig } from './config/schema.js';
import { isMetricsMessage, mergeExpositions, type MetricsMessage } from './http/host-metrics.js';

export const workerCount = (workers: GatewayConfig['server']['workers']): number =>
  workers === 'auto' ? availableParallelism() : workers;

/** Why this configuration cannot run several workers, or null. */
export const workersRefusal = (config: GatewayConfig, count: number): string | null => {
  if (count <= 1) return null;
  if (!config.store.redis)
    return `--workers ${count} needs Redis (--redis URL): workers share the log, and the embedded store is one process's memory`;
  if (config.demo)
    return '--workers does not run with --demo (the demo is one process on the embedded store)';
  return null;
};

/** How long the primary waits for the workers' parts of a host-wide `/metrics`. */
const COLLECT_MS = 2_000;

export interface Primary {
  /**
   * Resolves once every worker listens, with the address they share; rejects with the exit code of
   * a worker that could not start (a taken port), every other worker then stopped.
   */
  listening: Promise<{ address: string; port: number }>;
}

export const runPrimary = (count: number, logger: Logger): Primary => {
  const byIndex = new Map<number, Worker>();
  let draining = false;
  let up = 0;
  let started!: (a: { address: string; port: number }) => void;
  let failed!: (code: number) => void;
  const listening = new Promise<{ address: string; port: number }>((resolve, reject) => {
    started = resolve;
    failed = reject;
  });
  const fork = (index: number): void => {
    const worker = cluster.fork({ GATEWAY_WORKER: String(index) });
    byIndex.set(index, worker);
    let listened = false;
    worker.once('listening', (address: { address: string; port: number }) => {
      listened = true;
      logger.info({ worker: index, pid: worker.process.pid }, 'worker listening');
      if (++up === count) started({ address: address.address, port: address.port });
    });
    worker.on('message', (m: unknown) => {
      if (isMetricsMessage(m) && m.type === 'metrics-request') void answerMetrics(worker, m.id);
    });
    worker.once('exit', (code, signal) => {
      if (byIndex.get(index) === worker) byIndex.delete(index);
      if (draining) return;
      if (!listened && up < count) {
        // It could not start (the worker said why): a fresh one would fail the same way.
        draining = true;
        for (const w of byIndex.values()) w.process.kill('SIGTERM');
        failed(code ?? 1);
        return;
      }
      logger.error(
        { worker: index, pid: worker.process.pid, code, signal },
        'worker died: starting it again',
      );
      fork(index);
    });
  };

  /** Every live worker's exposition, merged, back to the worker that was asked. */
  const answerMetrics = async (asker: Worker, id: string): Promise<void> => {
    const parts = await Promise.all(
      [...byIndex].map(
        ([index, w]) =>
          new Promise<{ worker: string; text: string }>((resolve) => {
            const collectId = `${id}:${index}`;
            const done = (text: string): void => {
              clearTimeout(timer);
              w.off('message', onPart);
              resolve({ worker: String(index), text });
            };
            const onPart = (m: unknown): void => {
              if (isMetricsMessage(m) && m.type === 'metrics-part' && m.id === collectId) done(m.text);
            };
            // A worker busy or starting: the host view goes without its part rather than wait.
            const timer = setTimeout(() => done(''), COLLECT_MS);
            w.on('message', onPart);
            if (w.isConnected()) w.send({ type: 'metrics-collect', id: collectId } satisfies MetricsMessage);
            else done('');
          }),
      ),
    );
    if (asker.isConnected())
      asker.send({ type: 'metrics-reply', id, text: mergeExpositions(parts) } satisfies MetricsMessage);
  };

  const drain = (signal: NodeJS.Signals): void => {
    if (draining) return;
    draining = true;
    logger.info({ signal, workers: byIndex.size }, 'draining every worker');
    for (const w of byIndex.values()) w.process.kill(signal);
    const left = (): void => {
      if (byIndex.size > 0) return;
      logger.info('drained');
      process.exit(0);
    };
    cluster.on('exit', (w) => {
      for (const [i, x] of byIndex) if (x === w) byIndex.delete(i);
      left();
    });
    left();
  };
  process.once('SIGTERM', () => drain('SIGTERM'));
  process.once('SIGINT', () => drain('SIGINT'));

  for (let i = 0; i < count; i++) fork(i);
  return { listening };
};
