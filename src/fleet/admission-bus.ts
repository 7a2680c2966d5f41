/**
 * Admission wake-ups over Redis pub/sub (channel `<prefix>:admitted`): a replica that admits a queued
 * submission for a capsule it does not own says so, and the owner's dispatcher hands it over at once
 * instead of at its next idle look at the log. Only a signal: the submission is read from the log,
 * so a lost message (a reconnect, a replica starting) costs the owner's idle poll, never a message.
 */
import { Cluster, type Redis } from 'ioredis';
import type { Logger } from 'pino';

export interface Admission {
  replica: string;
  capsule: string;
  offset: number;
}

export class AdmissionBus {
  private readonly sub: Redis | Cluster;
  private readonly channel: string;
  private closed = false;
  private listener: ((capsule: string, offset: number) => void) | null = null;

  constructor(
    private readonly client: Redis | Cluster,
    private readonly replicaId: string,
    prefix = 'mg',
    logger?: Logger,
  ) {
    this.channel = `${prefix}:admitted`;
    // A subscribed connection takes no other commands: one of its own, subscribed again on every
    // (re)connect (as fleet-bus.ts, for the same reasons).
    this.sub =
      client instanceof Cluster
        ? client.duplicate()
        : client.duplicate({ commandTimeout: undefined, autoResubscribe: false });
    this.sub.on('error', (err: Error) => logger?.debug({ err: err.message }, 'admission bus error'));
    this.sub.on('ready', () => {
      if (!this.closed) this.sub.subscribe(this.channel).catch(() => undefined);
    });
    this.sub.on('message', (channel: string, text: string) => {
      if (channel !== this.channel) return;
      let m: Partial<Admission>;
      try {
        m = JSON.parse(text) as Partial<Admission>;
      } catch {
        return;
      }
      if (m.replica === this.replicaId || typeof m.capsule !== 'string') return;
      if (typeof m.offset !== 'number' || !Number.isSafeInteger(m.offset)) return;
      this.listener?.(m.capsule, m.offset);
    });
  }

  /**
   * Who hears other replicas' admissions (the queue's dispatcher). Set in the turn the bus is made:
   * nothing is heard before its connection is ready.
   */
  onAdmitted(listener: (capsule: string, offset: number) => void): void {
    this.listener = listener;
  }

  /** Fire and forget: the admission is durable already, the signal only saves the owner a poll. */
  announce(capsule: string, offset: number): void {
    if (this.closed) return;
    const message: Admission = { replica: this.replicaId, capsule, offset };
    this.client.publish(this.channel, JSON.stringify(message)).catch(() => undefined);
  }

  close(): void {
    this.closed = true;
    this.sub.disconnect();
  }
}
