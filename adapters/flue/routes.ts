/**
 * Thin Hono handlers for `/flue/{capsule}/{conversationId}` (Flue's streaming protocol): they
 * validate input, call the reader/admission/live modules and set the spec's headers. Decisions about
 * chunks live in projection.ts, about waiting in live.ts, about admission in admission.ts.
 */
import { may, principalOf, seesCapsule } from '../../src/auth/principal.js';
import { ownerContext } from '../../src/auth/namespace.js';
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { GatewayError } from '../../src/errors.js';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { Admissions, parsePromptBody } from './admission.js';
import { formatOffset, parseOffset } from './codec.js';
import { FIXED_HEADERS, HEADER, LIVE, QUERY, UPDATES_PAGE, VIEW } from './constants.js';
import { ConversationIndex } from './conversation-index.js';
import { offsetGone, readCycle, rebuild } from './conversation-reader.js';
import { FlueError, errorResponse, fromCoreError } from './errors.js';
import { FeedRegistry } from './feed-registry.js';
import { longPoll, sseResponse, type LiveDeps } from './live.js';
import type { ConversationProjector } from './projection.js';
import { SnapshotCache } from './snapshot-cache.js';
import { countUnexpected } from '../../src/http/unexpected-errors.js';

/** How long a conversation's shared projection outlives its last live reader. */
const LINGER_MS = 5_000;

const BASE = '/flue/:capsule/:conversationId';

const invalid = (message: string): FlueError => new FlueError('invalid_request', message);
const notFound = (): FlueError => new FlueError('stream_not_found', 'conversation not found');
const methodNotAllowed = (allow: string): FlueError =>
  new FlueError('method_not_allowed', 'method not allowed', '', undefined, { [HEADER.allow]: allow });

const jsonHeaders = (extra: Record<string, string> = {}): Record<string, string> => ({
  [HEADER.contentType]: 'application/json',
  [HEADER.cacheControl]: 'no-store',
  ...FIXED_HEADERS,
  ...extra,
});

const upToDateHeader = (upToDate: boolean): Record<string, string> =>
  upToDate ? { [HEADER.upToDate]: 'true' } : {};

/** `?view=…&offset=…&live=…` checked per §history and §updates. */
type ReadQuery = { view: 'history' } | { view: 'updates'; offset: string; live: 'long-poll' | 'sse' | null };

const single = (params: URLSearchParams, name: string): string | undefined => {
  const all = params.getAll(name);
  if (all.length > 1) throw invalid(`${name} may be given once`);
  return all[0];
};

const parseReadQuery = (params: URLSearchParams): ReadQuery => {
  const view = single(params, QUERY.view) ?? VIEW.history;
  if (view === VIEW.history) {
    if (params.has(QUERY.offset) || params.has(QUERY.tail) || params.has(QUERY.live))
      throw invalid('view=history takes no offset, tail or live');
    return { view: 'history' };
  }
  if (view !== VIEW.updates) throw invalid('view must be history or updates');
  if (params.has(QUERY.tail)) throw invalid('tail is not supported on this surface');
  const offsets = params.getAll(QUERY.offset);
  if (offsets.length !== 1 || offsets[0] === undefined) throw invalid('offset is required exactly once');
  const live = single(params, QUERY.live);
  if (live !== undefined && live !== LIVE.longPoll && live !== LIVE.sse)
    throw invalid('live must be long-poll or sse');
  return { view: 'updates', offset: offsets[0], live: live ?? null };
};

/** Absolute stream URL: `publicUrl` + path, or the request URL with its query stripped (§Admission). */
const streamUrlOf = (requestUrl: string, publicUrl: string | null): string => {
  const url = new URL(requestUrl);
  return publicUrl ? `${publicUrl.replace(/\/+$/, '')}${url.pathname}` : `${url.origin}${url.pathname}`;
};

const isJson = (contentType: string | undefined): boolean =>
  (contentType ?? '').split(';')[0]?.trim().toLowerCase() === 'application/json';

/** What the routes share with the surface's follow source (follow.ts): one index, one cache. */
export interface FlueShared {
  index: ConversationIndex;
  cache: SnapshotCache;
  /** The live feeds: `/v1/follow` readers of a conversation share its projection with the routes'. */
  feeds: FeedRegistry;
}

export const flueShared = (deps: AdapterDeps): FlueShared => {
  const { core, logger } = deps;
  const index = new ConversationIndex(core);
  const cache = new SnapshotCache();
  const reader = { core, cache };
  const feeds = new FeedRegistry({
    core,
    logger,
    seed: (capsule, conversationId, epoch, through) =>
      rebuild(reader, capsule, conversationId, epoch, through),
    observe: (capsule, epoch, after, records) => index.observe(capsule, epoch, after, records),
    lingerMs: LINGER_MS,
  });
  return { index, cache, feeds };
};

export const createRoutes = (deps: AdapterDeps, shared: FlueShared = flueShared(deps)): Hono => {
  const { core, config, logger } = deps;
  const { index, cache, feeds } = shared;
  const admissions = new Admissions(core, index, logger);
  const reader = { core, cache };
  /** The state through an offset: a copy of the live shared one when it is exactly there, else read. */
  const stateAt = async (
    capsule: string,
    conversationId: string,
    epoch: number,
    through: number,
  ): Promise<ConversationProjector> => {
    const shared = feeds.running(capsule)?.stateAt(conversationId, through);
    if (shared && shared.epoch === epoch) return shared.clone();
    return rebuild(reader, capsule, conversationId, epoch, through);
  };
  const keep = (capsule: string, offset: number, projector: ConversationProjector): void =>
    cache.put(capsule, offset, projector);
  const live: LiveDeps = { core, config, feeds, stateAt, keep };

  /** Run a handler, rendering every failure in Flue's grammar (unknown ones as internal_error). */
  const guarded =
    (handler: (c: Context, capsule: string, conversationId: string) => Promise<Response>) =>
    async (c: Context): Promise<Response> => {
      try {
        const principal = principalOf(c);
        if (principal.kind === 'anonymous')
          throw new FlueError('unauthorized', 'a valid credential is required (Authorization: Bearer …)');
        const capsule = c.req.param('capsule') ?? '';
        if (!core.hasCapsule(capsule) || !seesCapsule(principal, capsule))
          throw new FlueError('stream_not_found', 'unknown capsule');
        if (!may(principal, 'submit', capsule))
          throw new FlueError('forbidden', 'this credential lacks the "submit" scope');
        const chosen = c.req.param('conversationId') ?? '';
        if (chosen.trim() === '') throw invalid('conversation id must be a non-empty path segment');
        // Namespaced by owner: another owner's conversation of the same name is a different one
        // (so it is "not found" here), upstream and in the log alike.
        return await handler(c, capsule, ownerContext(principal, chosen));
      } catch (err) {
        if (err instanceof FlueError) return errorResponse(err, c.req.method !== 'HEAD');
        if (err instanceof GatewayError) return errorResponse(fromCoreError(err.code, err.details));
        countUnexpected('request');
        logger.error({ err, path: c.req.path }, 'flue: unhandled error');
        return errorResponse(new FlueError('internal_error', 'internal error'));
      }
    };

  /** The conversation's index entry (404 when it never received a message). */
  const lookup = async (capsule: string, conversationId: string) => {
    const view = await index.lookup(capsule, conversationId);
    if (!view.conversation) throw notFound();
    return view;
  };

  const read = guarded(async (c, capsule, conversationId) => {
    if (c.req.method === 'HEAD') {
      const view = await lookup(capsule, conversationId);
      const headers = jsonHeaders({
        [HEADER.nextOffset]: formatOffset(view.epoch, view.head),
        [HEADER.upToDate]: 'true',
      });
      return new Response(null, { status: 200, headers });
    }
    const query = parseReadQuery(new URL(c.req.url).searchParams);
    let after = 0;
    if (query.view === 'updates') {
      const parsed = parseOffset(query.offset);
      if (!parsed) throw invalid('malformed offset');
      if (parsed.kind === 'at') after = parsed.offset;
      const view = await lookup(capsule, conversationId);
      if (parsed.kind === 'at' && (parsed.epoch !== view.epoch || parsed.offset > view.head))
        throw offsetGone();
      // Records after the offset were trimmed: deltas from it would miss them (never `200 []`).
      if (parsed.kind === 'at' && (await core.cursorStatus(capsule, after)).status === 'gone')
        throw offsetGone();
      const liveRead = { capsule, conversationId, epoch: view.epoch, after };
      if (query.live === LIVE.sse) return sseResponse(live, c, liveRead);
      let cycle: Awaited<ReturnType<typeof longPoll>>;
      if (query.live === LIVE.longPoll) cycle = await longPoll(live, liveRead, c.req.raw.signal);
      else {
        const projector = await stateAt(capsule, conversationId, view.epoch, after);
        cycle = await readCycle(core, capsule, projector, after, UPDATES_PAGE);
        keep(capsule, cycle.next, projector);
      }
      const headers = jsonHeaders({
        [HEADER.nextOffset]: formatOffset(view.epoch, cycle.next),
        ...upToDateHeader(cycle.upToDate),
      });
      return new Response(cycle.body ?? JSON.stringify(cycle.chunks), { status: 200, headers });
    }
    const view = await lookup(capsule, conversationId);
    const projector = await stateAt(capsule, conversationId, view.epoch, view.head);
    const headers = jsonHeaders({
      [HEADER.nextOffset]: formatOffset(view.epoch, view.head),
      [HEADER.upToDate]: 'true',
    });
    const body = JSON.stringify(projector.snapshot(view.head));
    keep(capsule, view.head, projector);
    return new Response(body, { status: 200, headers });
  });

  const admit = guarded(async (c, capsule, conversationId) => {
    if (new URL(c.req.url).searchParams.has(QUERY.wait))
      throw invalid('wait is not supported: admission is asynchronous');
    if (!isJson(c.req.header('content-type')))
      throw new FlueError('unsupported_media_type', 'the body must be application/json');
    const text = await c.req.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new FlueError('invalid_json', 'the body is not valid JSON');
    }
    const body = parsePromptBody(json);
    const headerKey = c.req.header(HEADER.idempotencyKey);
    if (headerKey !== undefined && body.idempotencyKey === undefined) {
      if (headerKey === '' || headerKey.length > 256)
        throw invalid('Idempotency-Key must be 1 to 256 characters');
      body.idempotencyKey = headerKey;
    }
    const receipt = await admissions.admit(capsule, conversationId, body, principalOf(c).owner);
    const streamUrl = streamUrlOf(c.req.url, config.publicUrl);
    const headers = jsonHeaders({ [HEADER.location]: streamUrl, [HEADER.nextOffset]: receipt.offset });
    return new Response(JSON.stringify({ streamUrl, ...receipt }), { status: 202, headers });
  });

  const abort = guarded(async (_c, capsule, conversationId) => {
    const view = await index.lookup(capsule, conversationId);
    if (!view.conversation) return Response.json({ aborted: false }, { headers: jsonHeaders() });
    // §abort: everything queued behind the running submission first, so none of it starts.
    const withdrawn = await core.withdrawContext(capsule, conversationId, 'aborted', 'aborted');
    const projector = await stateAt(capsule, conversationId, view.epoch, view.head);
    const accepted = admissions.accepted.get(`${capsule}\u0000${conversationId}`) ?? [];
    const targets = new Set([...projector.openTasks(), ...accepted.filter((t) => !projector.knowsTask(t))]);
    let aborted = withdrawn > 0;
    let unreachable = false;
    for (const taskId of targets) {
      const outcome = await core.cancel(capsule, taskId);
      if (outcome.kind === 'canceled') aborted = true;
      if (outcome.kind === 'unreachable') unreachable = true;
    }
    if (!aborted && unreachable) throw fromCoreError('upstream_unreachable');
    return Response.json({ aborted }, { headers: jsonHeaders() });
  });

  const attachment = guarded(async (c, capsule, conversationId) => {
    if (c.req.method === 'HEAD') throw methodNotAllowed('GET');
    await lookup(capsule, conversationId);
    // Capsules take text only: no conversation ever holds an attachment.
    throw new FlueError('attachment_not_found', 'attachment not found');
  });

  const refuse = (allow: string) => guarded(async () => Promise.reject(methodNotAllowed(allow)));
  const tooLarge = (c: Context): Response =>
    errorResponse(new FlueError('payload_too_large', 'request body too large'), c.req.method !== 'HEAD');

  const app = new Hono();
  app.get(BASE, read);
  app.post(BASE, bodyLimit({ maxSize: config.bodyLimitBytes, onError: tooLarge }), admit);
  app.all(BASE, refuse('GET, HEAD, POST'));
  app.post(`${BASE}/abort`, abort);
  app.all(`${BASE}/abort`, refuse('POST'));
  app.get(`${BASE}/attachments/:attachmentId`, attachment);
  app.all(`${BASE}/attachments/:attachmentId`, refuse('GET'));
  // An empty conversation id (`/flue/cap` or `/flue/cap/`) is a bad request, not a missing route.
  app.all(
    '/flue/:capsule',
    guarded(async () => Promise.reject(new Error('unreachable'))),
  );
  app.all(
    '/flue/:capsule/',
    guarded(async () => Promise.reject(new Error('unreachable'))),
  );
  app.all('/flue/*', (c) => errorResponse(notFound(), c.req.method !== 'HEAD'));
  return app;
};
