/**
 * What a `GET /v1/follow` asks for: `stream=KEY@CURSOR` (repeatable; the cursor after the last `@`,
 * `-1` when absent), `live=sse` (default) or `long-poll` (with `wait=SECONDS`, a hold shorter than
 * the gateway's `downstream.longPollMaxMs`, for a client behind a proxy that cuts idle connections), and for a reconnecting EventSource the
 * `Last-Event-ID` token that carries every stream's cursor at once. The token is opaque to clients:
 * `v2.` and each cursor's base64url, joined by `.`, in the order of the `stream` parameters, so it
 * only makes sense with the URL it was handed out on (an EventSource reconnects to that URL). A
 * connection keeps the encoded pieces and re-encodes only the cursor that moved: one event costs one
 * cursor's base64 and a join, not every cursor's JSON. The earlier form (`v1.` and the base64url of
 * the cursors' JSON array) is still read, so a client holding one resumes exactly.
 */
export interface FollowKey {
  key: string;
  scheme: string;
  name: string;
  cursor: string;
}

export interface FollowRequest {
  keys: FollowKey[];
  live: 'sse' | 'long-poll';
  /** The long-poll's hold in milliseconds when the client asks for a shorter one (`wait=SECONDS`). */
  waitMs: number | null;
}

export class FollowRequestError extends Error {
  constructor(
    readonly status: 400 | 404,
    readonly code: 'bad_request' | 'not_found',
    message: string,
  ) {
    super(message);
  }
}

const TOKEN_V1 = 'v1.';
const TOKEN_V2 = 'v2.';
/** A key: `scheme:name`, the name printable without spaces (it is a URL's path pieces or an id). */
const KEY = /^[a-z][a-z0-9-]*:[!-~\u00a0-\uffff]{1,1024}$/;
const BASE64URL = /^[A-Za-z0-9_-]*$/;

const segment = (cursor: string): string => Buffer.from(cursor, 'utf8').toString('base64url');

/** The token of a connection's cursors, kept up to date one stream at a time. */
export class FollowToken {
  private readonly segments: string[];
  private text: string | null = null;

  constructor(cursors: readonly string[]) {
    this.segments = cursors.map(segment);
  }

  /** Stream `i` now stands at `cursor`. */
  set(i: number, cursor: string): void {
    this.segments[i] = segment(cursor);
    this.text = null;
  }

  /** The token for every cursor as it stands (made once per change, whatever asks for it). */
  toString(): string {
    return (this.text ??= TOKEN_V2 + this.segments.join('.'));
  }
}

export const encodeToken = (cursors: readonly string[]): string => new FollowToken(cursors).toString();

const decodeToken = (token: string, count: number): string[] => {
  const bad = new FollowRequestError(400, 'bad_request', 'Last-Event-ID is not a token of these streams');
  if (token.startsWith(TOKEN_V2)) {
    const parts = token.slice(TOKEN_V2.length).split('.');
    if (parts.length !== count || !parts.every((p) => BASE64URL.test(p))) throw bad;
    const cursors = parts.map((p) => Buffer.from(p, 'base64url').toString('utf8'));
    // Only the canonical spelling of each cursor: a byte that decodes to nothing sensible is refused.
    if (cursors.some((c, i) => segment(c) !== parts[i] || c === '')) throw bad;
    return cursors;
  }
  if (!token.startsWith(TOKEN_V1)) throw bad;
  let cursors: unknown;
  try {
    cursors = JSON.parse(Buffer.from(token.slice(TOKEN_V1.length), 'base64url').toString('utf8'));
  } catch {
    throw bad;
  }
  if (!Array.isArray(cursors) || cursors.length !== count || !cursors.every((c) => typeof c === 'string'))
    throw bad;
  return cursors as string[];
};

export const parseFollowRequest = (
  query: Record<string, string[]>,
  lastEventId: string | undefined,
  maxStreams: number,
): FollowRequest => {
  const streams = query.stream ?? [];
  if (streams.length === 0)
    throw new FollowRequestError(400, 'bad_request', 'name at least one stream=KEY@CURSOR');
  if (streams.length > maxStreams)
    throw new FollowRequestError(400, 'bad_request', `at most ${maxStreams} streams per connection`);
  const lives = query.live ?? [];
  if (lives.length > 1) throw new FollowRequestError(400, 'bad_request', 'live is given more than once');
  const live = lives[0] ?? 'sse';
  if (live !== 'sse' && live !== 'long-poll')
    throw new FollowRequestError(400, 'bad_request', 'live must be sse or long-poll');
  const waits = query.wait ?? [];
  if (waits.length > 1) throw new FollowRequestError(400, 'bad_request', 'wait is given more than once');
  let waitMs: number | null = null;
  if (waits[0] !== undefined) {
    if (live !== 'long-poll') throw new FollowRequestError(400, 'bad_request', 'wait is for live=long-poll');
    if (!/^\d{1,6}(\.\d{1,3})?$/.test(waits[0]))
      throw new FollowRequestError(400, 'bad_request', 'wait must be a number of seconds');
    waitMs = Math.round(Number(waits[0]) * 1000);
  }
  const seen = new Set<string>();
  const keys = streams.map((param): FollowKey => {
    const at = param.lastIndexOf('@');
    const key = at < 0 ? param : param.slice(0, at);
    const cursor = at < 0 ? '-1' : param.slice(at + 1);
    if (!KEY.test(key))
      throw new FollowRequestError(400, 'bad_request', `not a stream key: ${JSON.stringify(key)}`);
    if (seen.has(key)) throw new FollowRequestError(400, 'bad_request', `stream ${key} is named twice`);
    seen.add(key);
    const colon = key.indexOf(':');
    return { key, scheme: key.slice(0, colon), name: key.slice(colon + 1), cursor };
  });
  if (lastEventId !== undefined && lastEventId !== '') {
    const cursors = decodeToken(lastEventId, keys.length);
    keys.forEach((k, i) => (k.cursor = cursors[i]!));
  }
  return { keys, live, waitMs };
};
