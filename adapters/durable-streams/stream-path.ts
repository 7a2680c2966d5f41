/**
 * What a path under `/v1/stream/` names: exactly one stream, whatever the spelling. The URL parser
 * (node-server builds the Request's URL with `new URL`) resolves `.` and `..` segments, `%2e%2e`
 * included, before any route sees the path: `/v1/stream/a/%2e%2e/b` would reach the routes as
 * `/v1/stream/b`. So the request target is checked here as the client sent it, before anything is
 * normalised: a dot segment in any spelling is 404 (a name with one is no stream's), a control
 * character, a byte outside printable ASCII or a percent-escape that is not UTF-8 is 400. The
 * `Stream-Forked-From` header goes through the same check and the same decoding as a request path,
 * so it accepts exactly the `Location` the gateway returned, percent-encoded forms included.
 */
import type { Context } from 'hono';
import { getPath } from 'hono/utils/url';
import type { StreamErrorCode } from './stream-errors.js';

const STREAM_PREFIX = '/v1/stream/';

/** The stream path after `/v1/stream/`: at most this many bytes (UTF-8, decoded). */
const MAX_PATH_BYTES = 1024;

export interface PathRefusal {
  code: Extract<StreamErrorCode, 'not_found' | 'bad_request'>;
  message: string;
}

const DOT_SEGMENT: PathRefusal = { code: 'not_found', message: 'no such stream' };
const CONTROL_CHARACTER: PathRefusal = {
  code: 'bad_request',
  message: 'the stream path holds a control character',
};
export const NOT_UTF8: PathRefusal = {
  code: 'bad_request',
  message: 'the stream path is not valid percent-encoded UTF-8',
};

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });

/** C0 controls, DEL and C1 controls: no stream name holds one. */
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/** A raw segment's bytes after percent-decoding, or null when an escape is malformed. */
const segmentBytes = (raw: string): Buffer | null => {
  const out: number[] = [];
  for (let i = 0; i < raw.length; i++) {
    const ch = raw.charCodeAt(i);
    if (ch !== 0x25) {
      out.push(ch);
      continue;
    }
    const hex = raw.slice(i + 1, i + 3);
    if (!/^[0-9A-Fa-f]{2}$/.test(hex)) return null;
    out.push(parseInt(hex, 16));
    i += 2;
  }
  return Buffer.from(out);
};

/**
 * The raw path (no query), as the client sent it: null when it names one stream unambiguously,
 * else why not. Every segment is decoded strictly; an encoded `/` or `\` inside a segment splits it
 * again for the dot check (`a%2F..%2Fb` is refused too, though no parser here would resolve it).
 */
export const rawPathRefusal = (rawPath: string): PathRefusal | null => {
  // RFC 3986: everything but printable ASCII is percent-encoded in a request target.
  if (!/^[\x21-\x7e]*$/.test(rawPath)) {
    return CONTROL.test(rawPath) ? CONTROL_CHARACTER : NOT_UTF8;
  }
  let refusal: PathRefusal | null = null;
  for (const raw of rawPath.split('/')) {
    const bytes = segmentBytes(raw);
    if (bytes === null) return NOT_UTF8;
    let text: string;
    try {
      text = fatalUtf8.decode(bytes);
    } catch {
      return NOT_UTF8;
    }
    if (CONTROL.test(text)) return CONTROL_CHARACTER;
    if (text.split(/[/\\]/).some((part) => part === '.' || part === '..')) refusal ??= DOT_SEGMENT;
  }
  return refusal;
};

/** `http://host/p?q` or `/p?q` → `/p`, as sent (no normalisation). null: not a URL or path. */
export const rawPathOfTarget = (target: string): string | null => {
  const absolute = /^https?:\/\/[^/?#]*([^?#]*)/i.exec(target);
  const path = absolute ? absolute[1]! : /^(\/[^?#]*)/.exec(target)?.[1];
  return path === undefined ? null : path === '' ? '/' : path;
};

type NodeEnv = { incoming?: { url?: string } } | undefined;

/**
 * The request's path as the client sent it: node-server's IncomingMessage keeps the request target
 * untouched. Without one (Hono `app.request` in unit tests) the URL's path is the best there is.
 */
export const rawRequestPath = (c: Context): string => {
  const target = (c.env as NodeEnv)?.incoming?.url;
  const raw = target !== undefined ? rawPathOfTarget(target) : null;
  return raw ?? new URL(c.req.url).pathname;
};

/** The name a (checked) raw path under the prefix stands for, decoded as Hono decodes request paths. */
export const streamNameOfRawPath = (rawPath: string): string =>
  getPath({ url: `http://localhost${rawPath}` } as Request).slice(STREAM_PREFIX.length);

/** The stream path after `/v1/stream/`: non-empty, bounded, no empty or dot segments. */
export const validStreamPath = (path: string): boolean =>
  path.length > 0 &&
  Buffer.byteLength(path) <= MAX_PATH_BYTES &&
  path.split('/').every((seg) => seg !== '' && seg !== '.' && seg !== '..');
