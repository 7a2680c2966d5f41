/**
 * What subscriptions do (PROTOCOL.md §6–7): create, confirm, read, delete, link streams, claim,
 * ack and release wakes. The documents and keys are documents.ts's (one compare-and-set per
 * change); waking the subscriber, by a signed webhook or a wake event, is wakes.ts's.
 */
import type { Logger } from 'pino';
import type { StreamStore } from '../streams/types.js';
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
import { SubscriptionDocuments, type SubscriptionSettings } from './documents.js';
import { parseStreamOffset } from './offsets.js';
import { callbackToken, verifyCallbackToken } from './signing.js';
import {
  subscriptionKey,
  type SubscriptionDoc,
  type SubscriptionLink,
  type SubscriptionStore,
} from './types.js';
import { Wakes } from './wakes.js';

export class Subscriptions {
  private readonly docs: SubscriptionDocuments;
  private readonly wakes: Wakes;

  constructor(
    store: SubscriptionStore,
    streams: StreamStore,
    settings: SubscriptionSettings,
    logger: Logger,
  ) {
    this.docs = new SubscriptionDocuments(store, streams, settings);
    this.wakes = new Wakes(this.docs, logger);
  }

  start(): void {
    this.wakes.start();
  }

  close(): Promise<void> {
    return this.wakes.close();
  }

  jwks(): Promise<{ keys: Record<string, string>[] }> {
    return this.docs.jwks();
  }

  currentKid(): Promise<string> {
    return this.docs.currentKid();
  }

  /** The ring as stored now, rotated first when its current key is due (documents.ts). */
  refreshKeys(nowMs = Date.now()): ReturnType<SubscriptionDocuments['refreshKeys']> {
    return this.docs.refreshKeys(nowMs);
  }

  /** An append reached a stream: matching subscriptions link it and wake (wakes.ts). */
  appended(owner: string | null, path: string, storePath: string, before: number): void {
    this.wakes.appended(owner, path, storePath, before);
  }

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
        acked: (await this.docs.streams.head(storePath))?.tail ?? 0,
      });
    }
    const outcome = await this.docs.change<boolean>(key, (doc) => {
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
    const found = await this.docs.store.get(subscriptionKey(owner, id));
    if (!found) return fail('SUBSCRIPTION_NOT_FOUND', 'no such subscription');
    const doc = found.doc;
    const streams = await this.docs.streamViews(doc);
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
                  kid: await this.docs.currentKid(),
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
    return this.docs.change<null>(subscriptionKey(owner, id), (doc) =>
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
    for (const path of paths) tails.set(path, (await this.docs.streams.head(resolve(path)))?.tail ?? 0);
    return this.docs.change<null>(subscriptionKey(owner, id), (doc) => {
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
    return this.docs.change<null>(subscriptionKey(owner, id), (doc) => {
      if (!doc) return { refuse: fail('SUBSCRIPTION_NOT_FOUND', 'no such subscription') };
      doc.links = doc.links.filter((l) => l.path !== path);
      return { doc, value: null };
    });
  }

  /** Pull-wake: the pending work to `worker`, leased for the subscription's lease_ttl_ms. */
  async claim(owner: string | null, id: string, worker: string): Promise<Outcome<Claimed>> {
    const key = subscriptionKey(owner, id);
    const ring = await this.docs.keyRing();
    let streams: StreamView[] = [];
    const outcome = await this.docs.change<Claimed>(key, async (doc) => {
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
      streams = await this.docs.streamViews(doc);
      if (!streams.some((s) => s.has_pending)) return { refuse: fail('NO_PENDING_WORK', 'nothing to claim') };
      if (!doc.wake && this.docs.ownerWakes(doc.owner) >= this.docs.settings.maxWakesPerOwner)
        return {
          refuse: fail(
            'TOO_MANY_WAKES',
            `this owner has ${this.docs.settings.maxWakesPerOwner} wakes in flight`,
          ),
        };
      const wake = this.docs.mint(doc, streams, worker, now);
      doc.signalled = false;
      const token = await callbackToken(
        ring,
        { sub: key, wakeId: wake.id, generation: wake.generation },
        this.docs.settings.tokenTtlSeconds,
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
    if (outcome.ok) this.docs.countWake(owner);
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
    const outcome = await this.docs.change<{ next_wake: boolean }>(key, async (doc) => {
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
        const meta = await this.docs.streams.head(link.storePath);
        const parsed = parseStreamOffset(ack.offset);
        if (!meta || !parsed || parsed.epoch !== meta.epoch || parsed.position > meta.tail)
          return { refuse: fail('INVALID_OFFSET', `${ack.offset} is no offset of ${ack.stream}`) };
        link.acked = Math.max(link.acked, parsed.position);
      }
      if (input.done) doc.wake = null;
      else wake.leaseUntil = Date.now() + doc.leaseTtlMs;
      const pending = (await this.docs.streamViews(doc)).some((s) => s.has_pending);
      return { doc, value: { next_wake: pending } };
    });
    if (outcome.ok && input.done) this.wakes.kick(key);
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
    const outcome = await this.docs.change<null>(key, (doc) => {
      if (!doc) return { refuse: fail('SUBSCRIPTION_NOT_FOUND', 'no such subscription') };
      const wake = doc.wake;
      if (!wake || wake.id !== wakeId || wake.generation !== generation || checked.value.wakeId !== wake.id)
        return { refuse: fail('FENCED', 'this wake is no longer current') };
      doc.wake = null;
      return { doc, value: null };
    });
    if (outcome.ok) this.wakes.kick(key);
    return outcome;
  }

  private async checkToken(
    key: string,
    token: string,
  ): Promise<Outcome<{ wakeId: string; generation: number }>> {
    const verdict = await verifyCallbackToken(await this.docs.keyRing(), token);
    if (!verdict.ok)
      return fail(
        verdict.code,
        verdict.code === 'TOKEN_EXPIRED' ? 'the callback token expired' : 'invalid callback token',
      );
    // A token of another subscription (another owner's too) is no token here.
    if (verdict.claims.sub !== key) return fail('TOKEN_INVALID', 'invalid callback token');
    return { ok: true, value: verdict.claims };
  }
}
