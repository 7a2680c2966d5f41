/**
 * A real HTTP receiver of A2A push notifications on 127.0.0.1: it records every delivery (headers
 * and JSON body) and answers each with the next status of its script, then 200 for the rest.
 * Waiting is on deliveries, not on time.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface PushDelivery {
  eventId: string;
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, unknown>;
  /** What the receiver answered. */
  status: number;
}

export interface PushReceiver {
  url: string;
  deliveries: PushDelivery[];
  /** Resolves once `done(deliveries)` holds (checked on each delivery); rejects past `timeoutMs`. */
  until(done: (d: PushDelivery[]) => boolean, timeoutMs?: number): Promise<PushDelivery[]>;
  close(): Promise<void>;
}

export const startPushReceiver = async (statuses: number[] = []): Promise<PushReceiver> => {
  const deliveries: PushDelivery[] = [];
  const waiters = new Set<() => void>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const status = statuses[deliveries.length] ?? 200;
      deliveries.push({
        eventId: String(req.headers['x-a2a-event-id'] ?? ''),
        headers: req.headers,
        body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>,
        status,
      });
      res.writeHead(status).end();
      for (const w of [...waiters]) w();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/push`,
    deliveries,
    until: (done, timeoutMs = 20_000) =>
      new Promise((resolve, reject) => {
        const check = (): void => {
          if (!done(deliveries)) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve(deliveries);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`push receiver: still waiting after ${deliveries.length} deliveries`));
        }, timeoutMs);
        waiters.add(check);
        check();
      }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
};

/** Accepted deliveries, each event once (by its event id), in the order first accepted. */
export const acceptedOnce = (deliveries: PushDelivery[]): PushDelivery[] => {
  const seen = new Set<string>();
  return deliveries.filter((d) => {
    if (d.status < 200 || d.status > 299 || seen.has(d.eventId)) return false;
    seen.add(d.eventId);
    return true;
  });
};

/** A 1.0 delivery's terminal state, if it carries one. */
export const isTerminalUpdate = (d: PushDelivery): boolean => {
  const s = (d.body.statusUpdate as { status?: { state?: string } } | undefined)?.status?.state;
  return ['TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED', 'TASK_STATE_REJECTED'].includes(
    s ?? '',
  );
};
