/**
 * The accept backlog: how many finished handshakes the kernel queues for the gateway to accept.
 * Thousands of clients reconnect at once after a restart or a failover (a resume storm), and while
 * the event loop is busy answering the first ones the rest wait in this queue. Past it the kernel
 * drops their handshakes, and each such client is served only after TCP's retransmit, a second or
 * more later. Linux caps every listen backlog at `net.core.somaxconn`: 4,096 since kernel 5.4, 128
 * before it. Redis warns the same way when the cap is below its backlog.
 */
import { readFileSync } from 'node:fs';

/** What the gateway asks for; the kernel gives min(this, somaxconn). */
export const LISTEN_BACKLOG = 65_535;

/**
 * Below this cap a storm loses handshakes even when the loop stalls only briefly (seen in the
 * resume-storm bench at 4,096 with 10,000 clients; at 128 a few hundred reconnecting clients do).
 */
const STORM_BACKLOG = 1024;

export const SOMAXCONN_FILE = '/proc/sys/net/core/somaxconn';

/** The kernel's cap on listen backlogs, or null where it cannot be read (not Linux). */
export const kernelBacklogCap = (file: string = SOMAXCONN_FILE): number | null => {
  try {
    const value = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(value) && value > 0 ? value : null;
  } catch {
    return null;
  }
};

/** The start-up warning for a cap too low for reconnect storms, or null. */
export const backlogWarning = (cap: number | null): string | null =>
  cap !== null && cap < STORM_BACKLOG
    ? `net.core.somaxconn is ${cap}: the kernel queues at most ${cap} connections for accept ` +
      `(the gateway asks for ${LISTEN_BACKLOG}), so clients reconnecting at once past that lose ` +
      'their handshake and wait for TCP to retry (1 s or more); raise it with ' +
      `sysctl -w net.core.somaxconn=${LISTEN_BACKLOG}`
    : null;
