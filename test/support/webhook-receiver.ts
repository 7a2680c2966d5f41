/**
 * A real HTTP webhook receiver on 127.0.0.1 for subscription tests: it records every delivery and
 * answers with whatever the test sets (status and JSON body), one answer per delivery in order,
 * then the last one for every further delivery. Waiting is on deliveries, not on time.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { createPublicKey, verify } from 'node:crypto';
import type { AddressInfo } from 'node:net';

export interface Delivery {
  rawBody: string;
  body: {
    subscription_id: string;
    wake_id: string;
    generation: number;
    callback_url: string;
    callback_token: string;
    streams: {
      path: string;
      link_type: string;
      acked_offset: string;
      tail_offset: string;
      has_pending: boolean;
    }[];
  };
  signature: string;
}

export interface Answer {
  status: number;
  body: unknown;
}

export interface WebhookReceiver {
  url: string;
  deliveries: Delivery[];
  /** Resolves with delivery number `n` (1-based) once it has arrived. */
  delivery(n: number): Promise<Delivery>;
  close(): Promise<void>;
}

const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });

export const startWebhookReceiver = async (
  answers: Answer[] = [{ status: 200, body: {} }],
): Promise<WebhookReceiver> => {
  const deliveries: Delivery[] = [];
  const waiting: { n: number; resolve: (d: Delivery) => void }[] = [];
  const server: Server = createServer((req, res) => {
    void readBody(req).then((rawBody) => {
      const delivery: Delivery = {
        rawBody,
        body: JSON.parse(rawBody) as Delivery['body'],
        signature: String(req.headers['webhook-signature'] ?? ''),
      };
      deliveries.push(delivery);
      const answer = answers[Math.min(deliveries.length - 1, answers.length - 1)]!;
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer.body));
      for (const w of waiting.filter((w) => w.n <= deliveries.length)) {
        waiting.splice(waiting.indexOf(w), 1);
        w.resolve(deliveries[w.n - 1]!);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/webhook`,
    deliveries,
    delivery: (n) =>
      deliveries.length >= n
        ? Promise.resolve(deliveries[n - 1]!)
        : new Promise((resolve) => waiting.push({ n, resolve })),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
};

/** The receiver's side of `Webhook-Signature` (PROTOCOL.md §7) against a published JWKS. */
export const signatureVerifies = (delivery: Delivery, jwks: { keys: Record<string, string>[] }): boolean => {
  const m = /^t=(\d+),kid=([^,]+),ed25519=([A-Za-z0-9_-]+)$/.exec(delivery.signature);
  if (!m) return false;
  const key = jwks.keys.find((k) => k.kid === m[2]);
  if (!key) return false;
  return verify(
    null,
    Buffer.from(`${m[1]}.${delivery.rawBody}`),
    createPublicKey({ key, format: 'jwk' }),
    Buffer.from(m[3]!, 'base64url'),
  );
};
