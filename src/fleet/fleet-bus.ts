/**
 * Fleet announcements over Redis pub/sub (channel `<prefix>:fleet`): a replica joining, leaving, or
 * releasing a capsule says so, and the others act at once instead of at their next tick. Best effort:
 * a lost message only delays things to the next tick, never breaks the lease rules.
 */
import { Cluster, type Redis } from 'ioredis';
import type { Logger } from 'pino';

export type FleetMessage =
  | { type: 'join'; replica: string }
  | { type: 'leave'; replica: string }
  /** `unreachable`: released because this replica cannot reach the capsule; others take it at once. */
  | { type: 'release'; replica: string; capsule: string; unreachable?: boolean };

export class FleetBus {
  private readonly sub: Redis | Cluster;
  private readonly channel: string;
  private closed = false;

  constructor(
    private readonly client: Redis | Cluster,
    onMessage: (message: FleetMessage) => void,
    prefix = 'mg',
    logger?: Logger,
  ) {
    this.channel = `${prefix}:fleet`;
    // A connection of its own (a subscribed connection takes no other commands); it resubscribes on
    // every (re)connect, whatever happened to the previous subscription.
    this.sub =
      client instanceof Cluster
        ? client.duplicate()
        : // No autoResubscribe: 'ready' below subscribes again itself, and ioredis's own resubscribe
          // leaves its promise unhandled (an unhandled rejection when the connection closes at once).
          client.duplicate({ commandTimeout: undefined, autoResubscribe: false });
    this.sub.on('error', (err: Error) => logger?.debug({ err: err.message }, 'fleet bus error'));
    this.sub.on('ready', () => {
      if (!this.closed) this.sub.subscribe(this.channel).catch(() => undefined);
    });
    this.sub.on('message', (channel: string, text: string) => {
      if (channel !== this.channel) return;
      try {
        onMessage(JSON.parse(text) as FleetMessage);
      } catch (err) {
        logger?.warn({ err: String(err) }, 'fleet bus: bad message');
      }
    });
  }

  publish(message: FleetMessage): Promise<void> {
    return this.client.publish(this.channel, JSON.stringify(message)).then(
      () => undefined,
      () => undefined,
    );
  }

  close(): void {
    this.closed = true;
    this.sub.disconnect();
  }
}
