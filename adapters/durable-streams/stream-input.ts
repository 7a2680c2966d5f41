/**
 * Parsing and validation of a general stream request's headers, query and body (PROTOCOL.md §5,
 * §6, §7.1), pure: each function answers the parsed value or the refusal (`StreamInputError`), so
 * routes refuse bad input before the store is asked anything.
 */
import { z } from 'zod';
import type { ForkRequest, ProducerClaim, StreamConfig } from '../../src/streams/types.js';
import type { StreamErrorCode } from './stream-errors.js';
import { rawPathOfTarget, rawPathRefusal, streamNameOfRawPath, validStreamPath } from './stream-path.js';

export interface StreamInputError {
  code: StreamErrorCode;
  message: string;
}

type Parsed<T> = { ok: true; value: T } | { ok: false; error: StreamInputError };
const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
const bad = (message: string, code: StreamErrorCode = 'bad_request'): Parsed<never> => ({
  ok: false,
  error: { code, message },
});

const DEFAULT_CONTENT_TYPE = 'application/octet-stream';

/** §5.1: decimal, no sign, no leading zeros, no point or exponent. */
const decimalInteger = z
  .string()
  .regex(/^(0|[1-9]\d*)$/)
  .transform(Number)
  .refine((n) => Number.isSafeInteger(n));

/**
 * RFC 3339 date-time (`Z` or a numeric offset) naming a real instant: every field in its calendar
 * range (`2099-02-30` is refused, not rolled over into March; a leap second `:60` is refused, as
 * JavaScript cannot represent it), and not before 1970 (the stores keep expiry as Unix time).
 */
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;
const daysIn = (year: number, month: number): number => new Date(Date.UTC(year, month, 0)).getUTCDate();
const validRfc3339 = (s: string): boolean => {
  const m = RFC3339.exec(s);
  if (!m) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const offsetHours = m[8] === undefined ? 0 : Number(m[8]);
  const offsetMinutes = m[9] === undefined ? 0 : Number(m[9]);
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return false;
  if (hour > 23 || minute > 59 || second > 59 || offsetHours > 23 || offsetMinutes > 59) return false;
  const ms = Date.parse(s);
  return Number.isFinite(ms) && ms >= 0;
};

/**
 * The longest Stream-TTL: 100 years. Beyond it an expiry stops being a number every store and
 * Redis' PEXPIREAT take as an integer of milliseconds; a client asking for more means "forever",
 * which is no TTL at all.
 */
const MAX_TTL_SECONDS = 3_155_760_000;

/**
 * JSON bodies nested deeper than this (arrays and objects, the batch's own array counted) are 400:
 * re-serialising each message recurses once per level, and a body of a million `[` would exhaust
 * the stack. Checked by a scan before parsing.
 */
const MAX_JSON_DEPTH = 128;

/** The media type alone, lower-cased: `Application/JSON; charset=utf-8` → `application/json` (§5.2 compares types). */
export const mediaTypeOf = (raw: string | undefined): string | null => {
  if (raw === undefined) return null;
  const type = raw.split(';')[0]!.trim().toLowerCase();
  return /^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/.test(type) ? type : null;
};

export const isJsonMode = (contentType: string): boolean => contentType === 'application/json';

/**
 * §5.7: SSE data of a text/* or application/json stream is sent as text; of any other stream as
 * base64 (`Stream-SSE-Data-Encoding: base64`), since SSE carries only UTF-8 lines.
 */
export const sseBase64 = (contentType: string): boolean =>
  !contentType.startsWith('text/') && !isJsonMode(contentType);

export type Header = (name: string) => string | undefined;

/** `Stream-Closed: true` (any case); anything else is absent. */
export const closedFlag = (header: Header): boolean =>
  header('stream-closed')?.trim().toLowerCase() === 'true';

/** PUT's configuration: content type, Stream-TTL or Stream-Expires-At (both: 400, §5.1), Stream-Closed. */
export const parseCreate = (header: Header): Parsed<StreamConfig> => {
  const rawType = header('content-type');
  const contentType = rawType === undefined ? DEFAULT_CONTENT_TYPE : mediaTypeOf(rawType);
  if (contentType === null) return bad('malformed Content-Type');
  const ttlRaw = header('stream-ttl');
  const expiresRaw = header('stream-expires-at');
  if (ttlRaw !== undefined && expiresRaw !== undefined) {
    return bad('Stream-TTL and Stream-Expires-At are exclusive');
  }
  let ttlSeconds: number | null = null;
  if (ttlRaw !== undefined) {
    const ttl = decimalInteger.safeParse(ttlRaw);
    if (!ttl.success) return bad('Stream-TTL must be a non-negative decimal integer');
    if (ttl.data > MAX_TTL_SECONDS) return bad(`Stream-TTL must be at most ${MAX_TTL_SECONDS} seconds`);
    ttlSeconds = ttl.data;
  }
  let expiresAt: string | null = null;
  if (expiresRaw !== undefined) {
    if (!validRfc3339(expiresRaw)) {
      return bad('Stream-Expires-At must be an RFC 3339 timestamp of a real instant from 1970 on');
    }
    expiresAt = expiresRaw;
  }
  return ok({ contentType, ttlSeconds, expiresAt, closed: closedFlag(header) });
};

/** §5.2.1: all three producer headers or none; id non-empty; epoch and seq integers ≤ 2^53-1. */
export const parseProducer = (header: Header): Parsed<ProducerClaim | null> => {
  const id = header('producer-id');
  const epoch = header('producer-epoch');
  const seq = header('producer-seq');
  if (id === undefined && epoch === undefined && seq === undefined) return ok(null);
  if (id === undefined || epoch === undefined || seq === undefined) {
    return bad('Producer-Id, Producer-Epoch and Producer-Seq go together');
  }
  if (id.trim() === '') return bad('Producer-Id must not be empty');
  const e = decimalInteger.safeParse(epoch.trim());
  const s = decimalInteger.safeParse(seq.trim());
  if (!e.success || !s.success) return bad('Producer-Epoch and Producer-Seq must be non-negative integers');
  return ok({ id, epoch: e.data, seq: s.data });
};

/** Whether `text` nests arrays and objects deeper than `max` (strings skipped), in one linear scan. */
const nestedDeeperThan = (text: string, max: number): boolean => {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c)
        i++; // backslash: the next character is escaped
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) inString = true;
    else if (ch === 0x5b || ch === 0x7b) {
      if (++depth > max) return true;
    } else if (ch === 0x5d || ch === 0x7d) depth--;
  }
  return false;
};

/** Whether `text` holds at most `max` opening brackets in all, so that it cannot nest deeper. */
const fewBrackets = (text: string, max: number): boolean => {
  let n = 0;
  for (const bracket of ['[', '{'])
    for (let i = text.indexOf(bracket); i !== -1; i = text.indexOf(bracket, i + 1))
      if (++n > max) return false;
  return true;
};

/** Strict: a body that is not UTF-8 is refused, never stored with U+FFFD in place of its bytes. */
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** §7.1: one message per element of a top-level array (one level flattened), else the value itself. */
export const jsonMessages = (
  body: Buffer,
  { allowEmptyArray }: { allowEmptyArray: boolean },
): Parsed<Buffer[]> => {
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    return bad('body is not valid UTF-8');
  }
  if (!fewBrackets(text, MAX_JSON_DEPTH) && nestedDeeperThan(text, MAX_JSON_DEPTH)) {
    return bad(`body nests JSON deeper than ${MAX_JSON_DEPTH} levels`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return bad('body is not valid JSON');
  }
  if (!Array.isArray(value)) {
    const json = JSON.stringify(value);
    // Sent as it serialises (compact): the body's own bytes are the message.
    return ok([json === text ? body : Buffer.from(json, 'utf8')]);
  }
  if (value.length === 0 && !allowEmptyArray) return bad('an empty JSON array appends nothing');
  if (value.length === 0) return ok([]);
  // A batch sent as it serialises (what JSON.stringify on the client gives): each element's
  // serialisation is its own span of the body, so the messages are slices of it, not copies.
  if (JSON.stringify(value) === text) return ok(elementSlices(body, value.length));
  return ok(value.map((v: unknown) => Buffer.from(JSON.stringify(v), 'utf8')));
};

/**
 * The top-level elements of `body`, a non-empty JSON array of `count` elements in its compact
 * serialisation (no whitespace outside strings). Scanned as bytes: every structural character is
 * ASCII, and no byte of a multi-byte UTF-8 sequence is. A string is skipped to its closing quote
 * (one not escaped by an odd run of backslashes) with indexOf.
 */
const elementSlices = (body: Buffer, count: number): Buffer[] => {
  const out: Buffer[] = [];
  const end = body.length - 1; // the closing bracket
  let depth = 0;
  let start = 1;
  for (let i = 1; i < end; i++) {
    const ch = body[i];
    if (ch === 0x22) {
      let close = i;
      for (;;) {
        close = body.indexOf(0x22, close + 1);
        let slashes = 0;
        while (body[close - 1 - slashes] === 0x5c) slashes++;
        if (slashes % 2 === 0) break;
      }
      i = close;
    } else if (ch === 0x5b || ch === 0x7b) depth++;
    else if (ch === 0x5d || ch === 0x7d) depth--;
    else if (ch === 0x2c && depth === 0) {
      out.push(body.subarray(start, i));
      start = i + 1;
    }
  }
  out.push(body.subarray(start, end));
  // Parsed and serialised alike, so the count agrees; a disagreement would be a bug here, not input.
  if (out.length !== count) throw new Error(`a JSON batch split into ${out.length} elements, not ${count}`);
  return out;
};

export type ReadStart = { kind: 'start' } | { kind: 'now' } | { kind: 'at'; epoch: number; position: number };

/** §6: `-1`, `now` or one of this surface's offsets (`EPOCH_POSITION`, two 16-digit components). */
export const parseReadOffset = (values: string[] | undefined): Parsed<ReadStart> => {
  if (values === undefined || values.length === 0) return ok({ kind: 'start' });
  if (values.length > 1) return bad('offset given more than once');
  const raw = values[0]!;
  if (raw === '-1') return ok({ kind: 'start' });
  if (raw === 'now') return ok({ kind: 'now' });
  const m = /^(\d{16})_(\d{16})$/.exec(raw);
  if (!m) return bad('malformed offset');
  return ok({ kind: 'at', epoch: Number(m[1]), position: Number(m[2]) });
};

/**
 * §4.2: a fork PUT's `Stream-Forked-From` (the source's path, `/v1/stream/...`, or a URL of it),
 * `Stream-Fork-Offset` (one of this surface's offsets; none: the source's tail) and
 * `Stream-Fork-Sub-Offset` (decimal). null: no fork. A sub-offset without a source is 400.
 */
export const parseFork = (
  header: Header,
  prefix: string,
  publicUrl: string | null = null,
): Parsed<ForkRequest | null> => {
  const from = header('stream-forked-from');
  const offsetRaw = header('stream-fork-offset');
  const subRaw = header('stream-fork-sub-offset');
  if (from === undefined) {
    return offsetRaw === undefined && subRaw === undefined
      ? ok(null)
      : bad('Stream-Fork-Offset and Stream-Fork-Sub-Offset need Stream-Forked-From');
  }
  // The same check and decoding as a request's own path: the Location the gateway returned (an
  // absolute URL, percent-encoded as the client sent it, under `publicUrl` when one is configured,
  // whose own path is then no part of the stream's) names the stream it was returned for.
  const value = from.trim();
  const base = publicUrl?.replace(/\/$/, '');
  const raw = rawPathOfTarget(base && value.startsWith(`${base}/`) ? value.slice(base.length) : value);
  if (raw === null || !raw.startsWith(prefix)) {
    return bad(`Stream-Forked-From must name a path under ${prefix}`);
  }
  if (rawPathRefusal(raw) !== null) return bad('malformed Stream-Forked-From');
  const source = streamNameOfRawPath(raw);
  if (!validStreamPath(source)) return bad('malformed Stream-Forked-From');
  let offset: ForkRequest['offset'] = null;
  if (offsetRaw !== undefined) {
    const m = /^(\d{16})_(\d{16})$/.exec(offsetRaw.trim());
    if (!m) return bad('malformed Stream-Fork-Offset');
    offset = { epoch: Number(m[1]), position: Number(m[2]) };
  }
  let subOffset = 0;
  if (subRaw !== undefined) {
    const sub = decimalInteger.safeParse(subRaw.trim());
    if (!sub.success) return bad('Stream-Fork-Sub-Offset must be a non-negative decimal integer');
    subOffset = sub.data;
  }
  return ok({
    source,
    offset,
    subOffset,
    inheritContentType: header('content-type') === undefined,
    inheritExpiry: header('stream-ttl') === undefined && header('stream-expires-at') === undefined,
  });
};
