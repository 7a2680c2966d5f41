/**
 * What subscriptions do (PROTOCOL.md §6–7): create, confirm, read, delete, link streams, and wake
 * the subscriber when a linked stream has messages past its acked offset, by a signed webhook or
 * by a wake event in its wake stream that a worker claims. Every change is one compare-and-set of
 * the subscription's document (types.ts), so two replicas never both mint a wake, and a replica
 * working from an older copy is refused and reads again.
 *
 * Delivery: the replica that mints a webhook wake becomes the subscription's deliverer (a lease in
 * the document, renewed while it works, fenced by the document's version like capsule ingestion's
 * token); other replicas leave the subscription alone until that lease lapses. A sweep on every
 * replica (each `sweepMs`) finds due work: appends made through another replica, retries whose
 * `nextAttemptAt` has come, and wakes whose lease lapsed (the holder crashed or never answered):
 * those are dropped and their pending work wakes again, so an un-acked wake is delivered again
 * after a restart (at least once).
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { StreamStore } from '../streams/types.js';
import { globMatches } from './glob.js';
import { formatStreamOffset, parseStreamOffset } from './offsets.js';
import { postWebhook } from '../webhooks/delivery.js';
import type { ReceiverPolicy } from '../webhooks/receiver-url.js';
import { retryDelayMs } from '../webhooks/retry.js';
import {
  callbackToken,
  currentKey,
  freshKeyRing,
  jwksOf,
  rotated,
  signatureHeader,
  verifyCallbackToken,
} from './signing.js';
import {
  configHashOf,
  fail,
  type AckInput,
  type Claimed,
  type Outcome,
  type Resolve,
  type StreamView,
  type SubscriptionRequest,
} from './control.js';
import {
  subscriptionKey,
  type KeyRing,
  type SubscriptionDoc,
  type SubscriptionLink,
  type SubscriptionStore,
} from './types.js';

export interface SubscriptionSettings {
  receivers: ReceiverPolicy;
  /** Subscriptions one owner may hold. */
  maxPerOwner: number;
  /** Wakes one owner may have in flight at once (webhook deliveries and claims). */
  maxWakesPerOwner: number;
  /** Rotated-out signing keys stay published this long (receivers replaying old deliveries). */
  replayWindowMs: number;
  /** This replica, named in the delivery lease. */
  replicaId: string;
  /** How often every replica looks for due work. */
  sweepMs: number;
  /** How long a webhook receiver may take to answer. */
  deliveryTimeoutMs: number;
  /** How long a callback token is valid. */
  tokenTtlSeconds: number;
  /** The signing key is rotated when it is this old (0: never). */
  keyRotationMs: number;
}

/** A mutation: the new document, null to delete it, or a refusal to write anything. */
type Change<T> = { doc: SubscriptionDoc | null; value: T } | { refuse: Outcome<T> };

const MAX_CAS_TRIES = 20;

export class Subscriptions {
  private ring: KeyRing | null = null;
  private timer: NodeJS.Timeout | null = null;
  /** Kicks running in this replica, and those asked for again while running. */
  private readonly running = new Set<string>();
  private readonly again = new Set<string>();
  /** Webhook deliveries this replica has on the wire (close waits for them). */
  private readonly inflight = new Set<Promise<unknown>>();
  /** Wakes in flight per owner as the last sweep saw them, plus those minted since. */
  private wakesByOwner = new Map<string, number>();
  private closed = false;
  /** Cuts deliveries still on the wire at close: their wakes lapse and are delivered again. */
  private readonly stopping = new AbortController();

  constructor(
    private readonly store: SubscriptionStore,
    private readonly streams: StreamStore,
    private readonly settings: SubscriptionSettings,
    private readonly logger: Logger,
  ) {}

  start(): void {
    const tick = (): void => {
      if (this.closed) return;
      void this.sweep()
        .catch((err: unknown) => this.logger.warn({ err: String(err) }, 'subscriptions: sweep failed'))
        .finally(() => {
          if (!this.closed) this.timer = setTimeout(tick, this.settings.sweepMs);
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

  // ---- keys ----------------------------------------------------------------------------------

  private async keyRing(): Promise<KeyRing> {
    this.ring ??= await this.store.keyRing(freshKeyRing);
    return this.ring;
  }

  async jwks(): Promise<{ keys: Record<string, string>[] }> {
    // Read each time: another replica may have rotated.
    return jwksOf(await this.refreshKeys(), this.settings.replayWindowMs);
  }

  async currentKid(): Promise<string> {
    return currentKey(await this.keyRing()).kid;
  }

  /**
   * The ring as stored now (another replica may have rotated it), rotated first if the current key
   * is `keyRotationMs` old: one replica's rotation wins, the others adopt it.
   */
  async refreshKeys(nowMs = Date.now()): Promise<KeyRing> {
    let ring = await this.store.keyRing(freshKeyRing);
    const rotation = this.settings.keyRotationMs;
    if (rotation > 0 && nowMs - currentKey(ring).createdAt >= rotation) {
      const next = rotated(ring, this.settings.replayWindowMs, nowMs);
      ring = (await this.store.replaceKeyRing(ring, next)) ? next : await this.store.keyRing(freshKeyRing);
    }
    this.ring = ring;
    return ring;
  }

  // ---- the document, changed by compare-and-set ------------------------------------------------

  private async change<T>(
    key: string,
    fn: (doc: SubscriptionDoc | null) => Promise<Change<T>> | Change<T>,
  ): Promise<Outcome<T>> {
    for (let i = 0; i < MAX_CAS_TRIES; i++) {
      const current = await this.store.get(key);
      const result = await fn(current ? structuredClone(current.doc) : null);
      if ('refuse' in result) return result.refuse;
      if (result.doc === null && !current) return { ok: true, value: result.value };
      const put = await this.store.put(key, current?.version ?? 0, result.doc, this.settings.maxPerOwner);
      if (put.kind === 'written') return { ok: true, value: result.value };
      if (put.kind === 'owner_full')
        return fail(
          'TOO_MANY_SUBSCRIPTIONS',
          `this owner holds ${this.settings.maxPerOwner} subscriptions already`,
        );
    }
    throw new Error(`subscription ${key}: kept racing another writer`);
  }

  // ---- control API ---------------------------------------------------------------------------

  async create(
    owner: string | null,
    id: string,
    req: SubscriptionRequest,
    baseUrl: string,
    resolve: Resolve,
  ): Promise<Outcome<{ created: boolean; view: Record<string, unknown> }>> {
    const key = subscriptionKey(owner, id);
    const hash = configHashOf(req);
    // Explicit streams are linked at their current tail: a subscription starts from now.
    const links: SubscriptionLink[] = [];
    for (const path of [...new Set(req.streams)]) {
      const storePath = resolve(path);
      links.push({
        path,
        storePath,
        linkType: 'explicit',
        acked: (await this.streams.head(storePath))?.tail ?? 0,
      });
    }
    const outcome = await this.change<boolean>(key, (doc) => {
      if (doc) {
        return doc.configHash === hash
          ? { doc, value: false }
          : {
              refuse: fail(
                'SUBSCRIPTION_ALREADY_EXISTS',
                'the subscription exists with another configuration',
              ),
            };
      }
      const created: SubscriptionDoc = {
        id,
        owner,
        type: req.type,
        pattern: req.pattern,
        webhookUrl: req.webhookUrl,
        wakeStream: req.wakeStream,
        wakeStorePath: req.wakeStream === null ? null : resolve(req.wakeStream),
        leaseTtlMs: req.leaseTtlMs,
        description: req.description,
        configHash: hash,
        createdAt: new Date().toISOString(),
        status: 'active',
        links,
        generation: 0,
        wake: null,
        signalled: false,
        attempts: 0,
        nextAttemptAt: 0,
        deliverer: null,
        baseUrl,
      };
      return { doc: created, value: true };
    });
    if (!outcome.ok) return outcome;
    const view = await this.view(owner, id);
    if (!view.ok) return view;
    return { ok: true, value: { created: outcome.value, view: view.value } };
  }

  async view(owner: string | null, id: string): Promise<Outcome<Record<string, unknown>>> {
    const found = await this.store.get(subscriptionKey(owner, id));
    if (!found) return fail('SUBSCRIPTION_NOT_FOUND', 'no such subscription');
    const doc = found.doc;
    const streams = await this.streamViews(doc);
    return {
      ok: true,
      value: {
        id: doc.id,
        subscription_id: doc.id,
        type: doc.type,
        ...(doc.pattern !== null ? { pattern: doc.pattern } : {}),
        streams: streams.map(({ path, link_type, acked_offset }) => ({ path, link_type, acked_offset })),
        ...(doc.webhookUrl !== null
          ? {
              webhook: {
                url: doc.webhookUrl,
                signing: {
                  alg: 'ed25519',
                  kid: await this.currentKid(),
                  jwks_url: `${doc.baseUrl}/v1/stream/__ds/jwks.json`,
                },
              },
            }
          : {}),
        ...(doc.wakeStream !== null ? { wake_stream: doc.wakeStream } : {}),
        lease_ttl_ms: doc.leaseTtlMs,
        ...(doc.description !== null ? { description: doc.description } : {}),
        created_at: doc.createdAt,
        status: doc.status,
        generation: doc.generation,
        ...(doc.nextAttemptAt > Date.now()
          ? { next_attempt_at: new Date(doc.nextAttemptAt).toISOString() }
          : {}),
      },
    };
  }

  async remove(owner: string | null, id: string): Promise<Outcome<null>> {
    return this.change<null>(subscriptionKey(owner, id), (doc) =>
      doc ? { doc: null, value: null } : { refuse: fail('SUBSCRIPTION_NOT_FOUND', 'no such subscription') },
    );
  }

  async addStreams(
    owner: string | null,
    id: string,
    paths: string[],
    resolve: Resolve,
  ): Promise<Outcome<null>> {
    const tails = new Map<string, number>();
    for (const path of paths) tails.set(path, (await this.streams.head(resolve(path)))?.tail ?? 0);
    return this.change<null>(subscriptionKey(owner, id), (doc) => {
      if (!doc) return { refuse: fail('SUBSCRIPTION_NOT_FOUND', 'no such subscription') };
      for (const [path, tail] of tails) {
        const link = doc.links.find((l) => l.path === path);
        if (link) link.linkType = 'explicit';
        else doc.links.push({ path, storePath: resolve(path), linkType: 'explicit', acked: tail });
      }
      return { doc, value: null };
    });
  }

  async removeStream(owner: string | null, id: string, path: string): Promise<Outcome<null>> {
    return this.change<null>(subscriptionKey(owner, id), (doc) => {
      if (!doc) return { refuse: fail('SUBSCRIPTION_NOT_FOUND', 'no such subscription') };
      doc.links = doc.links.filter((l) => l.path !== path);
      return { doc, value: null };
    });
  }

  /** Pull-wake: the pending work to `worker`, leased for the subscription's lease_ttl_ms. */
  async claim(owner: string | null, id: string, worker: string): Promise<Outcome<Claimed>> {
    const key = subscriptionKey(owner, id);
    const ring = await this.keyRing();
    let streams: StreamView[] = [];
    const outcome = await this.change<Claimed>(key, async (doc) => {
      if (!doc) return { refuse: fail('SUBSCRIPTION_NOT_FOUND', 'no such subscription') };
      const now = Date.now();
      if (doc.wake && doc.wake.leaseUntil > now)
        return {
          refuse: fail(
            'ALREADY_CLAIMED',
            'another worker holds this subscription',
            doc.wake.holder ?? undefined,
          ),
        };
      streams = await this.streamViews(doc);
      if (!streams.some((s) => s.has_pending)) return { refuse: fail('NO_PENDING_WORK', 'nothing to claim') };
      if (!doc.wake && this.ownerWakes(doc.owner) >= this.settings.maxWakesPerOwner)
        return {
          refuse: fail('TOO_MANY_WAKES', `this owner has ${this.settings.maxWakesPerOwner} wakes in flight`),
        };
      const wake = this.mint(doc, streams, worker, now);
      doc.signalled = false;
      const token = await callbackToken(
        ring,
        { sub: key, wakeId: wake.id, generation: wake.generation },
        this.settings.tokenTtlSeconds,
      );
      return {
        doc,
        value: {
          wake_id: wake.id,
          generation: wake.generation,
          token,
          streams,
          lease_ttl_ms: doc.leaseTtlMs,
        },
      };
    });
    if (outcome.ok) this.countWake(owner);
    return outcome;
  }

  /**
   * A webhook's callback or a pull-wake worker's ack: the token, the generation and the wake id
   * must all name the current wake, else FENCED. Acks move acked offsets forward; `done` ends the
   * wake, otherwise its lease is extended.
   */
  async ack(
    owner: string | null,
    id: string,
    token: string,
    input: AckInput,
  ): Promise<Outcome<{ next_wake: boolean }>> {
    const key = subscriptionKey(owner, id);
    const checked = await this.checkToken(key, token);
    if (!checked.ok) return checked;
    const claims = checked.value;
    const outcome = await this.change<{ next_wake: boolean }>(key, async (doc) => {
      if (!doc) return { refuse: fail('SUBSCRIPTION_NOT_FOUND', 'no such subscription') };
      const wake = doc.wake;
      if (
        !wake ||
        wake.id !== input.wakeId ||
        wake.generation !== input.generation ||
        claims.generation !== wake.generation ||
        claims.wakeId !== wake.id
      )
        return { refuse: fail('FENCED', 'this wake is no longer current') };
      for (const ack of input.acks) {
        const link = doc.links.find((l) => l.path === ack.stream);
        if (!link)
          return { refuse: fail('INVALID_OFFSET', `the subscription does not follow ${ack.stream}`) };
        const meta = await this.streams.head(link.storePath);
        const parsed = parseStreamOffset(ack.offset);
        if (!meta || !parsed || parsed.epoch !== meta.epoch || parsed.position > meta.tail)
          return { refuse: fail('INVALID_OFFSET', `${ack.offset} is no offset of ${ack.stream}`) };
        link.acked = Math.max(link.acked, parsed.position);
      }
      if (input.done) doc.wake = null;
      else wake.leaseUntil = Date.now() + doc.leaseTtlMs;
      const pending = (await this.streamViews(doc)).some((s) => s.has_pending);
      return { doc, value: { next_wake: pending } };
    });
    if (outcome.ok && input.done) this.kick(key);
    return outcome;
  }

  /** Gives the current wake back: its pending work wakes again. */
  async release(
    owner: string | null,
    id: string,
    token: string,
    wakeId: string,
    generation: number,
  ): Promise<Outcome<null>> {
    const key = subscriptionKey(owner, id);
    const checked = await this.checkToken(key, token);
    if (!checked.ok) return checked;
    const outcome = await this.change<null>(key, (doc) => {
      if (!doc) return { refuse: fail('SUBSCRIPTION_NOT_FOUND', 'no such subscription') };
      const wake = doc.wake;
      if (!wake || wake.id !== wakeId || wake.generation !== generation || checked.value.wakeId !== wake.id)
        return { refuse: fail('FENCED', 'this wake is no longer current') };
      doc.wake = null;
      return { doc, value: null };
    });
    if (outcome.ok) this.kick(key);
    return outcome;
  }

  private async checkToken(
    key: string,
    token: string,
  ): Promise<Outcome<{ wakeId: string; generation: number }>> {
    const verdict = await verifyCallbackToken(await this.keyRing(), token);
    if (!verdict.ok)
      return fail(
        verdict.code,
        verdict.code === 'TOKEN_EXPIRED' ? 'the callback token expired' : 'invalid callback token',
      );
    // A token of another subscription (another owner's too) is no token here.
    if (verdict.claims.sub !== key) return fail('TOKEN_INVALID', 'invalid callback token');
    return { ok: true, value: verdict.claims };
  }

  // ---- wakes ---------------------------------------------------------------------------------

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
    for (const key of await this.store.ownerKeys(owner)) {
      const found = await this.store.get(key);
      if (!found) continue;
      const doc = found.doc;
      const follows = doc.links.some((l) => l.storePath === storePath);
      if (!follows && doc.pattern !== null && globMatches(doc.pattern, path)) {
        await this.change<null>(key, (d) => {
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
    await this.refreshKeys();
    const counts = new Map<string, number>();
    const keys = await this.store.keys();
    for (const key of keys) {
      const found = await this.store.get(key);
      if (found?.doc.wake) counts.set(found.doc.owner ?? '', (counts.get(found.doc.owner ?? '') ?? 0) + 1);
    }
    this.wakesByOwner = counts;
    for (const key of keys) this.kick(key);
  }

  private ownerWakes(owner: string | null): number {
    return this.wakesByOwner.get(owner ?? '') ?? 0;
  }

  private countWake(owner: string | null): void {
    this.wakesByOwner.set(owner ?? '', this.ownerWakes(owner) + 1);
  }

  private async streamViews(doc: SubscriptionDoc): Promise<StreamView[]> {
    return Promise.all(
      doc.links.map(async (l) => {
        const meta = await this.streams.head(l.storePath);
        const epoch = meta?.epoch ?? 0;
        const tail = meta && !meta.gone ? meta.tail : l.acked;
        return {
          path: l.path,
          link_type: l.linkType,
          acked_offset: meta ? formatStreamOffset(epoch, l.acked) : '-1',
          tail_offset: meta ? formatStreamOffset(epoch, tail) : '-1',
          has_pending: tail > l.acked,
        };
      }),
    );
  }

  private mint(
    doc: SubscriptionDoc,
    streams: StreamView[],
    holder: string | null,
    now: number,
  ): NonNullable<SubscriptionDoc['wake']> {
    doc.generation += 1;
    const tails: Record<string, number> = {};
    for (const s of streams) {
      const link = doc.links.find((l) => l.path === s.path);
      const parsed = parseStreamOffset(s.tail_offset);
      if (link && parsed) tails[link.storePath] = parsed.position;
    }
    doc.wake = {
      id: `w_${randomUUID()}`,
      generation: doc.generation,
      tails,
      holder,
      leaseUntil: now + doc.leaseTtlMs,
    };
    return doc.wake;
  }

  /** Lapsed leases dropped; then a webhook delivered or a wake event written if work is due. */
  private async look(key: string): Promise<void> {
    const found = await this.store.get(key);
    if (!found) return;
    const now = Date.now();
    const { doc } = found;
    if (doc.wake && doc.wake.leaseUntil <= now) {
      await this.change<null>(key, (d) => {
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
    const outcome = await this.change<boolean>(key, async (doc) => {
      if (!doc || doc.wake || doc.signalled || !doc.wakeStorePath)
        return { refuse: { ok: true, value: false } };
      const streams = await this.streamViews(doc);
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
    const result = await this.streams.append(wakeStorePath, {
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
    const ring = await this.keyRing();
    let payload: Record<string, unknown> | null = null;
    let target: string | null = null;
    let owner: string | null = null;
    const minted = await this.change<boolean>(key, async (doc) => {
      const now = Date.now();
      if (!doc || doc.wake || !doc.webhookUrl || now < doc.nextAttemptAt)
        return { refuse: { ok: true, value: false } };
      if (doc.deliverer && doc.deliverer.replica !== this.settings.replicaId && doc.deliverer.until > now)
        return { refuse: { ok: true, value: false } };
      const streams = await this.streamViews(doc);
      if (!streams.some((s) => s.has_pending)) return { refuse: { ok: true, value: false } };
      if (this.ownerWakes(doc.owner) >= this.settings.maxWakesPerOwner)
        return { refuse: { ok: true, value: false } };
      const wake = this.mint(doc, streams, null, now);
      // The wake is held while the receiver may still answer; its own lease starts with the answer.
      wake.leaseUntil = now + Math.max(doc.leaseTtlMs, this.settings.deliveryTimeoutMs) + 1_000;
      doc.deliverer = {
        replica: this.settings.replicaId,
        until: now + Math.max(doc.leaseTtlMs, this.settings.deliveryTimeoutMs) + 1_000,
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
          this.settings.tokenTtlSeconds,
        ),
      };
      return { doc, value: true };
    });
    if (!minted.ok || !minted.value || !payload || !target) return;
    this.countWake(owner);
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
    await this.change<null>(key, (doc) => {
      if (!doc?.wake || doc.wake.id !== wake.wake_id) return { refuse: { ok: true, value: null } };
      if (!verdict.ok) {
        doc.wake = null;
        doc.attempts += 1;
        doc.nextAttemptAt = Date.now() + retryDelayMs(doc.attempts);
        // The retry stays with this replica unless it has not made it a little after it is due
        // (gone, or restarted under another id): then any replica takes it.
        doc.deliverer = {
          replica: this.settings.replicaId,
          until: doc.nextAttemptAt + 2 * this.settings.sweepMs + 1_000,
        };
        return { doc, value: null };
      }
      doc.attempts = 0;
      doc.nextAttemptAt = 0;
      doc.wake.leaseUntil = Date.now() + doc.leaseTtlMs;
      doc.deliverer = { replica: this.settings.replicaId, until: doc.wake.leaseUntil };
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
      policy: this.settings.receivers,
      timeoutMs: this.settings.deliveryTimeoutMs,
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
