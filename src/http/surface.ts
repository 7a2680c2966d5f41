/**
 * What a surface (one folder under `adapters/`) hands the assembly: its routes, the one path prefix
 * they all live under, and how it speaks where the shared middleware must answer for it — a path that
 * does not percent-decode, a request past an abuse bound. The assembly, the limits and the connection
 * accounting loop over the list; nothing else names a surface.
 */
import type { Context, Hono } from 'hono';
import type { IncomingMessage } from 'node:http';
import type { Principal } from '../auth/principal.js';

/** A surface's 429: `retryAfterSeconds` goes in Retry-After; the body is the surface's own. */
export type RateLimitedRenderer = (c: Context, retryAfterSeconds: number) => Response;

/** One event of a followed stream, in its surface's own terms, and that stream's cursor after it. */
export interface FollowEvent {
  event: string;
  data: unknown;
  cursor: string;
  /** `data` as JSON text, when the source has it already (a record's, serialised once per process). */
  json?: string;
}

/** A stream one caller may follow, from its own cursors. */
export interface FollowTarget {
  /**
   * Events after `cursor` (at most about `limit`); with none, waits up to `waitMs` for some. `cursor`
   * is where a reader stands after them (moved on past records the stream does not show, or over a
   * gap the events name).
   */
  read(
    cursor: string,
    limit: number,
    waitMs: number,
    signal: AbortSignal,
  ): Promise<{ events: FollowEvent[]; cursor: string }>;
  /**
   * Live delivery pushed from one subscription per stream per process, for a reader that read up to
   * `cursor` and found nothing more: `sink.events` gets every later batch, in order, until the
   * returned handle is closed or `sink.lost` is called (the reader then reads again from its cursor).
   * Null when the reader cannot join at `cursor` now: it reads (and waits) instead. Absent: reads only.
   * The events handed over may be shared by every reader of the stream: they must not be changed.
   */
  live?(cursor: string, sink: FollowLiveSink): { close(): void } | null;
}

/** Where a stream's live events go (FollowTarget.live). Both calls are synchronous. */
export interface FollowLiveSink {
  events(events: readonly FollowEvent[], cursor: string): void;
  /** The live delivery ended (a drain, the log no longer continuing it): read again from the cursor. */
  lost(): void;
}

export type FollowOpen =
  | { ok: true; target: FollowTarget; cursor: string }
  /** 404: no such stream, or not one this caller may read (indistinguishable); 400: a bad cursor. */
  | { ok: false; status: 400 | 404; message: string };

/** The streams of a surface that `GET /v1/follow` can hold, under one key scheme (`murmur:…`). */
export interface FollowSource {
  scheme: string;
  /**
   * The stream `name` (the key after `scheme:`) as `principal` may read it, from `cursor`: `-1` or
   * `0` from the start, `now` from the head, else one of the stream's own cursors.
   */
  open(principal: Principal, name: string, cursor: string): Promise<FollowOpen>;
}

/** An answer as it goes out: status, lower-case headers, a body (or none). */
export interface DirectAnswer {
  status: number;
  headers: Record<string, string>;
  body: string | null;
}

/** A request's header as Hono reads it (`c.req.header(name)`); `name` lower-case. */
export type HeaderReader = (name: string) => string | undefined;

export interface DirectRequest {
  req: IncomingMessage;
  method: string;
  /** The path, as the target was sent (and as Hono would route it). */
  path: string;
  principal: Principal;
  header: HeaderReader;
  /** The whole body (read once). */
  body(): Promise<Buffer>;
}

/** A surface's route served straight from Node's request, before Hono (direct-routes.ts). */
export interface DirectRoute {
  /**
   * Whether the route serves this request (method, plain path, headers), decided before anything
   * else runs, without side effects; false: Hono serves it, with everything it serves it with.
   */
  takes(method: string, path: string, header: HeaderReader): boolean;
  /** The answer. The route's own checks (scopes, bounds, input) are the Hono route's, shared. */
  serve(request: DirectRequest): Promise<DirectAnswer>;
  /** What the route answers for a fault of `serve` (its Hono twin's onError). */
  failed(err: unknown, path: string): DirectAnswer;
  /** 429 past an abuse bound (its surface's rateLimited). */
  rateLimited(retryAfterSeconds: number): DirectAnswer;
}

export interface Surface {
  /** The connection label (`/metrics`, `/capsules`). */
  name: string;
  /** Every route of the surface starts with it (e.g. `/flue/`); no two surfaces share one. */
  prefix: string;
  /**
   * The paths that address one capsule, its id the first group: counted as that capsule's
   * connections, and bounded by the per-key stream and submission caps.
   */
  capsulePath?: RegExp;
  /** Full paths, mounted at '/'. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  routes: Hono<any, any, any>;
  /** 400 for a path segment that does not percent-decode; absent: the ops grammar. */
  malformedPath?: (c: Context) => Response;
  /** 429 past an abuse bound (`Retry-After` given); absent: the ops grammar. */
  rateLimited?: RateLimitedRenderer;
  /** Its streams as `GET /v1/follow` holds them; absent: none can be followed there. */
  follow?: FollowSource;
  /**
   * Its hottest route served before Hono (direct-routes.ts), under the same rules; never on its
   * capsule paths.
   */
  direct?: DirectRoute;
  /** All its requests count against the per-key and per-IP open-request caps (not only capsule paths). */
  capped?: boolean;
  /** A POST to one of its capsule paths is a submission (the per-owner submission rate). */
  submits?: boolean;
}

/** The surface a path belongs to, if any (its prefix, or the prefix without its closing slash). */
export const surfaceAt = (surfaces: readonly Surface[], path: string): Surface | undefined =>
  surfaces.find((s) => path.startsWith(s.prefix) || `${path}/` === s.prefix);
