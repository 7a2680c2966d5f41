/**
 * Failures nobody meant: an exception a request handler did not expect (answered 500 by whoever
 * caught it) and, process-wide, a rejection or exception with no handler at all. Each is logged
 * where it is caught and counted here, so `/metrics` shows that something is wrong while the replica
 * goes on serving: one tenant's odd request must never take every reader of the replica down.
 */
import type { Logger } from 'pino';

export type UnexpectedWhere = 'request' | 'rejection' | 'exception';

const counts: Record<UnexpectedWhere, number> = { request: 0, rejection: 0, exception: 0 };

export const countUnexpected = (where: UnexpectedWhere): void => {
  counts[where]++;
};

/** Read at scrape time by `/metrics` (`murmur_gateway_unexpected_errors_total{where}`). */
export const unexpectedErrorCounts = (): Readonly<Record<UnexpectedWhere, number>> => counts;

let installed: { rejection: (r: unknown) => void; exception: (e: Error) => void } | null = null;

/**
 * The process-level guard: an unhandled rejection or an uncaught exception is logged and counted
 * instead of ending the process (Node's default for both). Installed once by the process runner,
 * not by `startGateway`, so an embedding program (and a test) keeps its own policy.
 */
export const installProcessGuard = (logger: Logger): void => {
  if (installed) return;
  installed = {
    rejection: (reason) => {
      countUnexpected('rejection');
      logger.error({ err: reason }, 'unhandled rejection (the process goes on)');
    },
    exception: (err) => {
      countUnexpected('exception');
      logger.error({ err }, 'uncaught exception (the process goes on)');
    },
  };
  process.on('unhandledRejection', installed.rejection);
  process.on('uncaughtException', installed.exception);
};
