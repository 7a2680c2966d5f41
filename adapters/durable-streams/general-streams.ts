/**
 * `/v1/stream/{path}`: the general, writable Durable Streams (PROTOCOL.md), every path but the
 * read-only capsule streams (`/v1/stream/murmur/{capsule}`, mounted before these). Create (forks
 * too, §4.2), append (JSON mode and bytes, Stream-Seq, idempotent producers, close), delete (a
 * stream with forks: soft, 410 from then on) and HEAD here; reads in general-read.ts. Off
 * (`durableStreams.writable: false`): every method is 404. The path was checked as sent before any
 * route (stream-path.ts); the stream it names is in the caller's namespace (stream-owner.ts).
 * Validation is stream-input.ts; each request is one store call, so a refused one leaves nothing
 * behind.
 */
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import type { StatusCode } from 'hono/utils/http-status';
import { bodyLimit } from 'hono/body-limit';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import type { DirectAnswer, DirectRoute } from '../../src/http/surface.js';
import type { AppendResult, StreamStore } from '../../src/streams/types.js';
import { readGeneralStream } from './general-read.js';
import { principalOf, type Principal } from '../../src/auth/principal.js';
import { streamAccessError, streamRefusal } from './stream-access.js';
import { placeOf, type StreamPlace } from './stream-owner.js';
import {
  GONE_MESSAGE,
  SECURITY_HEADERS,
  streamError,
  streamProblem,
  streamsRateLimitedError,
} from './stream-errors.js';
import { expiryHeaders, metaHeaders, tailHeaders } from './stream-headers.js';
import {
  closedFlag,
  isJsonMode,
  jsonMessages,
  mediaTypeOf,
  parseCreate,
  parseFork,
  parseProducer,
  type Header,
} from './stream-input.js';
import { validStreamPath } from './stream-path.js';
import { countUnexpected } from '../../src/http/unexpected-errors.js';

const GENERAL_STREAM_PREFIX = '/v1/stream/';
const ROUTE = '/v1/stream/*';
const RESERVED = '__ds';

const streamPathOf = (c: Context): string => c.req.path.slice(GENERAL_STREAM_PREFIX.length);
/** The stream the request names, in the caller's namespace (stream-owner.ts). */
const placeFor = (c: Context): StreamPlace => placeOf(principalOf(c), streamPathOf(c));
const storePathOf = (c: Context): string => placeFor(c).storePath;

/**
 * The general stream a caller names by `path` (after `/v1/stream/`), as the store knows it (in the
 * caller's namespace, stream-owner.ts), or null when the path names none of this surface's streams.
 * `GET /v1/follow` (follow.ts) asks this; the routes check the path first and then ask placeOf too.
 */
export const generalStreamPath = (principal: Principal, path: string): string | null => {
  if (path === RESERVED || path.startsWith(`${RESERVED}/`) || !validStreamPath(path)) return null;
  return placeOf(principal, path).storePath;
};
const headerOf =
  (c: Context): Header =>
  (name) =>
    c.req.header(name);

/** An answer computed without a Context, sent through one (the direct route sends it as it is). */
const send = (c: Context, a: DirectAnswer): Response =>
  c.newResponse(a.body, a.status as StatusCode, a.headers);

/** A path (after the prefix) of the protocol's extensions, never a general stream. */
const reservedPath = (path: string): boolean => path === RESERVED || path.startsWith(`${RESERVED}/`);

export interface GeneralStreams {
  routes: Hono;
  /** The append (POST), served before Hono (src/http/direct-routes.ts); absent when the surface is off. */
  direct?: DirectRoute;
}

export const createGeneralStreams = (deps: AdapterDeps): GeneralStreams => {
  const app = new Hono();
  const settings = deps.config.durableStreams;
  const store = deps.streams;
  if (!settings?.writable || !store) {
    app.all(ROUTE, (c) =>
      streamProblem(c, 'not_found', 'general streams are off (durableStreams.writable is false)'),
    );
    return { routes: app };
  }
  const { maxBodyBytes, maxMessageBytes } = settings;

  app.use(ROUTE, async (c, next) => {
    const path = streamPathOf(c);
    // The protocol's extensions live under `__ds/`: never a stream of ours. Subscriptions and the
    // JWKS are served before these routes (subscriptions.ts); any other `__ds/` path is 501.
    if (reservedPath(path))
      return streamProblem(
        c,
        'not_implemented',
        `${RESERVED}/ is reserved for protocol extensions this gateway does not serve`,
      );
    if (!validStreamPath(path)) return streamProblem(c, 'not_found', 'no such stream');
    const refused = streamRefusal(c);
    if (refused) return refused;
    await next();
  });

  const tooLargeBody = (): DirectAnswer =>
    streamError('body_too_large', `request body exceeds ${maxBodyBytes} bytes`);
  const bodyTooLarge = (c: Context): Response => send(c, tooLargeBody());
  const countedLimit = bodyLimit({ maxSize: maxBodyBytes, onError: bodyTooLarge });
  /**
   * hono's bodyLimit, with its Content-Length case answered here: it decides that case from the
   * header alone too, but asks `c.req.raw.body` first, and that getter builds a web Request with a
   * ReadableStream over the socket, through which the body is then read (about a third of an
   * append's CPU), instead of node-server's direct read. A body without Content-Length is counted
   * by hono's as it arrives.
   */
  const limit: MiddlewareHandler = async (c, next) => {
    const length = c.req.header('content-length');
    if (length === undefined || c.req.header('transfer-encoding') !== undefined) return countedLimit(c, next);
    if (parseInt(length, 10) > maxBodyBytes) return bodyTooLarge(c);
    await next();
  };
  const bodyOf = async (c: Context): Promise<Buffer> => Buffer.from(await c.req.arrayBuffer());
  const oversized = (entries: Buffer[]): boolean => entries.some((e) => e.length > maxMessageBytes);
  const tooLargeMessage = (): DirectAnswer =>
    streamError('message_too_large', `a message exceeds ${maxMessageBytes} bytes`);
  const tooLarge = (c: Context): Response => send(c, tooLargeMessage());

  app.put(ROUTE, limit, async (c) => {
    const parsed = parseCreate(headerOf(c));
    if (!parsed.ok) return streamProblem(c, parsed.error.code, parsed.error.message);
    const parsedFork = parseFork(headerOf(c), GENERAL_STREAM_PREFIX, deps.config.publicUrl);
    if (!parsedFork.ok) return streamProblem(c, parsedFork.error.code, parsedFork.error.message);
    // The source is named in the caller's namespace too: another owner's stream is no source.
    const fork = parsedFork.value && {
      ...parsedFork.value,
      source: placeOf(principalOf(c), parsedFork.value.source).storePath,
    };
    const config = parsed.value;
    const body = await bodyOf(c);
    let entries: Buffer[] = [];
    if (body.length > 0) {
      // A fork without Content-Type takes its source's: its body is parsed as that type.
      const type = fork?.inheritContentType ? await sourceTypeOf(fork.source) : config.contentType;
      if (type !== null && isJsonMode(type)) {
        const messages = jsonMessages(body, { allowEmptyArray: true });
        if (!messages.ok) return streamProblem(c, messages.error.code, messages.error.message);
        entries = messages.value;
      } else {
        entries = [body];
      }
    }
    if (oversized(entries)) return tooLarge(c);
    const place = placeFor(c);
    const result = await store.create(place.storePath, config, entries, fork ?? undefined, place.owner);
    // A create with messages counts as an append for the subscriptions that follow the path.
    // A fork's inherited messages are no append: only the body's are.
    if (result.kind === 'created' && entries.length > 0)
      deps.subscriptions?.appended(
        place.owner,
        streamPathOf(c),
        place.storePath,
        result.meta.tail - entries.length,
      );
    switch (result.kind) {
      case 'too_many_streams':
        return streamProblem(c, 'too_many_streams', 'the gateway holds as many streams as it may');
      case 'too_many_owner_streams':
        return streamProblem(
          c,
          'too_many_streams',
          'this owner holds as many streams as it may (durableStreams.maxStreamsPerOwner)',
        );
      case 'gone':
        return streamProblem(c, 'stream_exists', 'the stream was deleted and its forks still read it');
      case 'source_not_found':
        return streamProblem(c, 'not_found', 'no such source stream (Stream-Forked-From)');
      case 'source_gone':
        return streamProblem(c, 'source_gone', 'the source stream was deleted');
      case 'source_type_mismatch':
        return streamProblem(c, 'content_type_mismatch', "the fork's content type differs from its source's");
      case 'bad_fork':
        return streamProblem(c, result.code, result.message);
      case 'conflict':
        return streamProblem(c, 'stream_exists', 'the stream exists with another configuration');
      case 'exists':
        return c.body(null, 200, metaHeaders(result.meta));
      case 'created':
        return c.body(null, 201, { ...metaHeaders(result.meta), location: locationOf(c, deps) });
    }
  });

  /**
   * An append (or a close) to the general stream `path` (after the prefix) by `principal`, its body
   * read only once the headers passed: POST through Hono and its direct route alike.
   */
  const append = async (
    principal: Principal,
    path: string,
    header: Header,
    readBody: () => Promise<Buffer>,
  ): Promise<DirectAnswer> => {
    const close = closedFlag(header);
    const producer = parseProducer(header);
    if (!producer.ok) return streamError(producer.error.code, producer.error.message);
    const body = await readBody();
    if (body.length === 0 && !close) return streamError('bad_request', 'an append needs a body');
    // A close-only POST carries no messages: its Content-Type is not compared (nothing is typed).
    let contentType: string | null = null;
    let entries: Buffer[] = [];
    if (body.length > 0) {
      contentType = mediaTypeOf(header('content-type'));
      if (contentType === null) return streamError('bad_request', 'an append needs a valid Content-Type');
      if (isJsonMode(contentType)) {
        const messages = jsonMessages(body, { allowEmptyArray: false });
        if (!messages.ok) return streamError(messages.error.code, messages.error.message);
        entries = messages.value;
      } else {
        entries = [body];
      }
      if (oversized(entries)) return tooLargeMessage();
    }
    const place = placeOf(principal, path);
    const result = await store.append(place.storePath, {
      contentType,
      entries,
      streamSeq: header('stream-seq') ?? null,
      producer: producer.value,
      close,
    });
    if (result.kind === 'appended' && entries.length > 0)
      deps.subscriptions?.appended(
        place.owner,
        path,
        place.storePath,
        result.meta.tail - entries.length,
        result.followers,
      );
    return appendAnswer(result, entries.length > 0);
  };

  app.post(ROUTE, limit, async (c) =>
    send(c, await append(principalOf(c), streamPathOf(c), headerOf(c), () => bodyOf(c))),
  );

  /** The content type a fork without one inherits (null: no such source; create answers why). */
  const sourceTypeOf = async (source: string): Promise<string | null> =>
    (await store.head(source))?.contentType ?? null;

  app.delete(ROUTE, async (c) => {
    switch (await store.delete(storePathOf(c))) {
      case 'deleted':
        return c.body(null, 204, SECURITY_HEADERS);
      case 'gone':
        return streamProblem(c, 'stream_gone', GONE_MESSAGE);
      case 'not_found':
        return streamProblem(c, 'not_found', 'no such stream');
    }
  });

  app.on(['GET', 'HEAD'], ROUTE, async (c) => {
    const path = storePathOf(c);
    if (c.req.method === 'HEAD') return headAnswer(c, store, path);
    return readGeneralStream(c, deps, store, path);
  });

  // The store unreachable (Redis down or frozen): the request did not reach it, or its one atomic
  // step ran whole; the client may retry (a producer's retry is deduplicated). Anything else is no
  // outage: Redis answering a script with an error (a script stops where it failed, what it wrote
  // before stays) or a fault of the gateway's own is 500, never a 503 that invites a blind retry.
  const failed = (err: unknown, path: string): DirectAnswer => {
    if (!storeUnreachable(err)) {
      countUnexpected('request');
      deps.logger.error({ err, path }, 'general stream: unexpected error');
      return streamError('internal', 'internal error');
    }
    deps.logger.warn({ err: String(err), path }, 'general stream: store failed');
    return streamError('unavailable', 'the stream store is unavailable', { 'retry-after': '1' });
  };
  app.onError((err, c) => send(c, failed(err, c.req.path)));

  app.all(ROUTE, (c) =>
    streamProblem(c, 'method_not_allowed', `${c.req.method} is not part of the protocol`, {
      allow: 'GET, HEAD, PUT, POST, DELETE',
    }),
  );

  /**
   * POST with a Content-Length to a valid stream path, served before Hono: its middleware above
   * (reserved and invalid paths, scopes), `limit` and the handler, in that order, through the same
   * functions. The path has no escape (direct-routes.ts): it is the stream's name as it is, and
   * onePathOneStream (index.ts) has nothing to refuse in it (printable ASCII, no dot segment).
   * A chunked body is counted as it arrives by Hono's bodyLimit: not taken.
   */
  const direct: DirectRoute = {
    takes: (method, target, header) => {
      if (method !== 'POST' || !target.startsWith(GENERAL_STREAM_PREFIX)) return false;
      const path = target.slice(GENERAL_STREAM_PREFIX.length);
      return (
        !reservedPath(path) &&
        validStreamPath(path) &&
        header('content-length') !== undefined &&
        header('transfer-encoding') === undefined
      );
    },
    serve: async ({ principal, method, path, header, body }) => {
      const refused = streamAccessError(principal, method);
      if (refused) return refused;
      if (parseInt(header('content-length')!, 10) > maxBodyBytes) return tooLargeBody();
      return append(principal, path.slice(GENERAL_STREAM_PREFIX.length), header, body);
    },
    failed,
    rateLimited: streamsRateLimitedError,
  };
  return { routes: app, direct };
};

/**
 * Errors of a store that did not answer (connection lost, command timed out) or refused to run the
 * step at all (`LOADING`, `READONLY` after a failover, `BUSY`, `OOM`, `CLUSTERDOWN`: their own
 * prefixes), as opposed to a script that failed while running (`ERR …`) or a fault of ours.
 */
const PROGRAM_ERRORS = new Set(['TypeError', 'RangeError', 'ReferenceError', 'SyntaxError']);
const storeUnreachable = (err: unknown): boolean => {
  if (!(err instanceof Error)) return true;
  if (err.name === 'ReplyError') return !err.message.startsWith('ERR');
  return !PROGRAM_ERRORS.has(err.name);
};

const locationOf = (c: Context, deps: AdapterDeps): string => {
  const url = new URL(c.req.url);
  return `${deps.config.publicUrl?.replace(/\/$/, '') ?? url.origin}${url.pathname}`;
};

const headAnswer = async (c: Context, store: StreamStore, path: string): Promise<Response> => {
  const meta = await store.head(path);
  if (!meta) return streamProblem(c, 'not_found', 'no such stream');
  if (meta.gone) return streamProblem(c, 'stream_gone', GONE_MESSAGE);
  return c.body(null, 200, { ...metaHeaders(meta), ...expiryHeaders(meta), 'cache-control': 'no-store' });
};

/** §5.2 and §5.2.1: the status and recovery headers of each append outcome. */
const appendAnswer = (result: AppendResult, wroteData: boolean): DirectAnswer => {
  switch (result.kind) {
    case 'appended': {
      const headers = tailHeaders(result.meta);
      if (!result.producer) return { status: 204, headers, body: null };
      headers['producer-epoch'] = String(result.producer.epoch);
      headers['producer-seq'] = String(result.producer.seq);
      return { status: wroteData ? 200 : 204, headers, body: null };
    }
    case 'duplicate': {
      const headers = tailHeaders(result.meta);
      if (!result.producer) return { status: 204, headers, body: null };
      headers['producer-epoch'] = String(result.producer.epoch);
      headers['producer-seq'] = String(result.producer.seq);
      return { status: 204, headers, body: null };
    }
    case 'not_found':
      return streamError('not_found', 'no such stream');
    case 'gone':
      return streamError('stream_gone', GONE_MESSAGE);
    case 'closed':
      return streamError('stream_closed', 'the stream is closed', {
        'stream-closed': 'true',
        'stream-next-offset': metaHeaders(result.meta)['stream-next-offset']!,
      });
    case 'content_type_mismatch':
      return streamError('content_type_mismatch', `the stream's content type is ${result.meta.contentType}`);
    case 'stream_seq_conflict':
      return streamError('stream_seq_conflict', 'Stream-Seq must exceed the last one appended');
    case 'stale_producer_epoch':
      return streamError('stale_producer_epoch', 'a newer producer epoch exists', {
        'producer-epoch': String(result.currentEpoch),
      });
    case 'producer_epoch_seq_not_zero':
      return streamError('bad_request', 'a new producer epoch starts at Producer-Seq 0');
    case 'producer_seq_gap':
      return streamError('producer_seq_gap', 'Producer-Seq skips ahead', {
        'producer-expected-seq': String(result.expected),
        'producer-received-seq': String(result.received),
      });
  }
};
