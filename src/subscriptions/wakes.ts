/**
 * Waking subscribers (PROTOCOL.md §7): when a linked stream has messages past a subscription's
 * acked offset, a signed webhook (src/webhooks/delivery.ts) or a wake event in its wake stream.
 * The replica that mints a webhook wake becomes the subscription's deliverer (a lease in the
 * document, renewed while it works, fenced by the document's version like capsule ingestion's
 * token); other replicas leave the subscription alone until that lease lapses. A sweep on every
 * replica (each `sweepMs`) finds due work: appends made through another replica, retries whose
 * `nextAttemptAt` has come, and wakes whose lease lapsed (the holder crashed or never answered):
 * those are dropped and their pending work wakes again, so an un-acked wake is delivered again
 * after a restart (at least once).
 */
import type { Logger } from 'pino';
import { postWebhook } from '../webhooks/delivery.js';
import { retryDelayMs } from '../webhooks/retry.js';
import type { StreamView } from './control.js';
import type { SubscriptionDocuments } from './documents.js';
import { globMatches } from './glob.js';
import { callbackToken, signatureHeader } from './signing.js';
import type { KeyRing } from './types.js';

export class Wakes {
  private timer: NodeJS.Timeout | null = null;
  /** Kicks running in this replica, and those asked for again while running. */
  private readonly running = new Set<string>();
  private readonly again = new Set<string>();
  /** Webhook deliveries this replica has on the wire (close waits for them). */
  private readonly inflight = new Set<Promise<unknown>>();
  private closed = false;
  /** Cuts deliveries still on the wire at close: their wakes lapse and are delivered again. */
  private readonly stopping = new AbortController();

  constructor(
    private readonly docs: SubscriptionDocuments,
    private readonly logger: Logger,
  ) {}

  start(): void {
    const tick = (): void => {
      if (this.closed) return;
      void this.sweep()
        .catch((err: unknown) => this.logger.warn({ err: String(err) }, 'subscriptions: sweep failed'))
        .finally(() => {
          if (!this.closed) this.timer = setTimeout(tick, this.docs.settings.sweepMs);
        });
    };
    this.timer = setTimeout(tick, 0);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.stopping.abort();
    await Promise.allSettled([...this.inflight]);
  }

  /**
   * An append reached `storePath` (named `path` by `owner`), whose tail was `before` just before
   * it. A subscription of that owner whose pattern matches and which does not follow the stream
   * yet links it before the append (so the append is pending), then every follower is woken.
   */
  appended(owner: string | null, path: string, storePath: string, before: number): void {
    void this.linkAndWake(owner, path, storePath, before).catch((err: unknown) =>
      this.logger.warn({ err: String(err), path }, 'subscriptions: could not wake after an append'),
    );
  }

  private async linkAndWake(
    owner: string | null,
    path: string,
    storePath: string,
    before: number,
  ): Promise<void> {
    for (const key of await this.docs.store.ownerKeys(owner)) {
      const found = await this.docs.store.get(key);
      if (!found) continue;
      const doc = found.doc;
      const follows = doc.links.some((l) => l.storePath === storePath);
      if (!follows && doc.pattern !== null && globMatches(doc.pattern, path)) {
        await this.docs.change<null>(key, (d) => {
          if (!d || d.links.some((l) => l.storePath === storePath))
            return { refuse: { ok: true, value: null } };
          d.links.push({ path, storePath, linkType: 'pattern', acked: before });
          return { doc: d, value: null };
        });
        this.kick(key);
      } else if (follows) this.kick(key);
    }
  }

  /** Looks at one subscription now (coalesced: one look at a time per subscription here). */
  kick(key: string): void {
    if (this.closed) return;
    if (this.running.has(key)) {
      this.again.add(key);
      return;
    }
    this.running.add(key);
    void this.look(key)
      .catch((err: unknown) => this.logger.warn({ err: String(err), key }, 'subscriptions: delivery failed'))
      .finally(() => {
        this.running.delete(key);
        if (this.again.delete(key)) this.kick(key);
      });
  }

  async sweep(): Promise<void> {
    await this.docs.refreshKeys();
    const counts = new Map<string, number>();
    const keys = await this.docs.store.keys();
    for (const key of keys) {
      const found = await this.docs.store.get(key);
      if (found?.doc.wake) counts.set(found.doc.owner ?? '', (counts.get(found.doc.owner ?? '') ?? 0) + 1);
    }
    this.docs.recountWakes(counts);
    for (const key of keys) this.kick(key);
  }

  private async look(key: string): Promise<void> {
    const found = await this.docs.store.get(key);
    if (!found) return;
    const now = Date.now();
    const { doc } = found;
    if (doc.wake && doc.wake.leaseUntil <= now) {
      await this.docs.change<null>(key, (d) => {
        if (!d?.wake || d.wake.leaseUntil > Date.now()) return { refuse: { ok: true, value: null } };
        d.wake = null;
        d.signalled = false;
        return { doc: d, value: null };
      });
      return this.look(key);
    }
    if (doc.wake) return;
    if (doc.type === 'webhook') return this.deliverWebhook(key);
    return this.signalWakeStream(key);
  }

  private async signalWakeStream(key: string): Promise<void> {
    let event: Record<string, unknown> | null = null;
    let wakeStorePath: string | null = null;
    const outcome = await this.docs.change<boolean>(key, async (doc) => {
      if (!doc || doc.wake || doc.signalled || !doc.wakeStorePath)
        return { refuse: { ok: true, value: false } };
      const streams = await this.docs.streamViews(doc);
      if (!streams.some((s) => s.has_pending)) return { refuse: { ok: true, value: false } };
      doc.signalled = true;
      wakeStorePath = doc.wakeStorePath;
      event = {
        type: 'wake',
        subscription_id: doc.id,
        streams: streams.filter((s) => s.has_pending),
        claim_url: `${doc.baseUrl}/v1/stream/__ds/subscriptions/${encodeURIComponent(doc.id)}/claim`,
      };
      return { doc, value: true };
    });
    if (!outcome.ok || !outcome.value || !event || !wakeStorePath) return;
    const result = await this.docs.streams.append(wakeStorePath, {
      contentType: 'application/json',
      entries: [Buffer.from(JSON.stringify(event))],
      streamSeq: null,
      producer: null,
      close: false,
    });
    if (result.kind !== 'appended') {
      this.logger.warn({ key, result: result.kind }, 'subscriptions: the wake stream refused a wake event');
      // Signalled stays set: a missing or closed wake stream is not retried on every append.
    }
  }

  private async deliverWebhook(key: string): Promise<void> {
    const ring = await this.docs.keyRing();
    let payload: Record<string, unknown> | null = null;
    let target: string | null = null;
    let owner: string | null = null;
    const minted = await this.docs.change<boolean>(key, async (doc) => {
      const now = Date.now();
      if (!doc || doc.wake || !doc.webhookUrl || now < doc.nextAttemptAt)
        return { refuse: { ok: true, value: false } };
      if (
        doc.deliverer &&
        doc.deliverer.replica !== this.docs.settings.replicaId &&
        doc.deliverer.until > now
      )
        return { refuse: { ok: true, value: false } };
      const streams = await this.docs.streamViews(doc);
      if (!streams.some((s) => s.has_pending)) return { refuse: { ok: true, value: false } };
      if (this.docs.ownerWakes(doc.owner) >= this.docs.settings.maxWakesPerOwner)
        return { refuse: { ok: true, value: false } };
      const wake = this.docs.mint(doc, streams, null, now);
      // The wake is held while the receiver may still answer; its own lease starts with the answer.
      wake.leaseUntil = now + Math.max(doc.leaseTtlMs, this.docs.settings.deliveryTimeoutMs) + 1_000;
      doc.deliverer = {
        replica: this.docs.settings.replicaId,
        until: now + Math.max(doc.leaseTtlMs, this.docs.settings.deliveryTimeoutMs) + 1_000,
      };
      target = doc.webhookUrl;
      owner = doc.owner;
      const callbackUrl = `${doc.baseUrl}/v1/stream/__ds/subscriptions/${encodeURIComponent(doc.id)}/callback`;
      payload = {
        subscription_id: doc.id,
        wake_id: wake.id,
        generation: wake.generation,
        streams,
        callback_url: callbackUrl,
        callback_token: await callbackToken(
          ring,
          { sub: key, wakeId: wake.id, generation: wake.generation },
          this.docs.settings.tokenTtlSeconds,
        ),
      };
      return { doc, value: true };
    });
    if (!minted.ok || !minted.value || !payload || !target) return;
    this.docs.countWake(owner);
    const wake = payload as { wake_id: string; generation: number; streams: StreamView[] };
    const delivery = this.post(target, JSON.stringify(payload), ring);
    this.inflight.add(delivery);
    let verdict: { ok: boolean; done: boolean; why?: string };
    try {
      verdict = await delivery;
    } finally {
      this.inflight.delete(delivery);
    }
    // Closing: the wake is left to lapse, and another replica (or the next start) delivers it again.
    if (this.closed) return;
    await this.docs.change<null>(key, (doc) => {
      if (!doc?.wake || doc.wake.id !== wake.wake_id) return { refuse: { ok: true, value: null } };
      if (!verdict.ok) {
        doc.wake = null;
        doc.attempts += 1;
        doc.nextAttemptAt = Date.now() + retryDelayMs(doc.attempts);
        // The retry stays with this replica unless it has not made it a little after it is due
        // (gone, or restarted under another id): then any replica takes it.
        doc.deliverer = {
          replica: this.docs.settings.replicaId,
          until: doc.nextAttemptAt + 2 * this.docs.settings.sweepMs + 1_000,
        };
        return { doc, value: null };
      }
      doc.attempts = 0;
      doc.nextAttemptAt = 0;
      doc.wake.leaseUntil = Date.now() + doc.leaseTtlMs;
      doc.deliverer = { replica: this.docs.settings.replicaId, until: doc.wake.leaseUntil };
      if (verdict.done) {
        // `{done: true}`: the receiver took everything the wake showed.
        for (const link of doc.links) {
          const tail = doc.wake.tails[link.storePath];
          if (tail !== undefined) link.acked = Math.max(link.acked, tail);
        }
        doc.wake = null;
      }
      return { doc, value: null };
    });
    if (!verdict.ok)
      this.logger.info({ key, why: verdict.why }, 'subscriptions: webhook delivery failed; retrying later');
    if (verdict.done) this.kick(key);
  }

  private async post(
    url: string,
    body: string,
    ring: KeyRing,
  ): Promise<{ ok: boolean; done: boolean; why?: string }> {
    const verdict = await postWebhook({
      url,
      body,
      headers: { 'content-type': 'application/json', 'webhook-signature': signatureHeader(ring, body) },
      policy: this.docs.settings.receivers,
      timeoutMs: this.docs.settings.deliveryTimeoutMs,
      signal: this.stopping.signal,
    });
    if (!verdict.ok) return { ok: false, done: false, why: verdict.why };
    let done = false;
    try {
      done = (JSON.parse(verdict.text) as { done?: unknown } | null)?.done === true;
    } catch {
      // A 2xx without JSON is taken as received, not done.
    }
    return { ok: true, done };
  }
}
