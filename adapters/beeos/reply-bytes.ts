/**
 * The bytes of a streaming `agent_reply` without re-serialising its body. A reply envelope carries
 * the whole body so far, so JSON.stringify of each one escaped the body again for every chunk (and
 * its string builder allocated about three times the output): the largest allocation of the BeeOS
 * live path. Here a reply keeps its body's JSON escape as bytes, extended by each chunk's escape,
 * and an envelope's frame is its head, those bytes and its tail, copied into one Buffer.
 *
 * The bytes are exactly encodeEnvelopeBytes(envelope) (test/adapters/beeos/lazy-encoding.test.ts):
 * the same keys in the same order, the same escapes.
 */
import { MESSAGE_HEAD } from './codec.js';
import type { Part } from './envelope.js';

const isHigh = (c: number): boolean => c >= 0xd800 && c <= 0xdbff;
const isLow = (c: number): boolean => c >= 0xdc00 && c <= 0xdfff;

/** The JSON escape (no quotes) of a string that only grows at its end, as bytes. */
export class JsonText {
  private buf: Buffer = Buffer.allocUnsafe(256);
  /** Bytes of buf in use; [0, length) never changes once written (growth copies to a new Buffer). */
  length = 0;
  private endsHigh = false;

  /**
   * Append `text`'s escape. False when that would not equal escaping the whole string at once:
   * a surrogate pair split across two appends (JSON.stringify escapes a lone half, not a pair).
   */
  append(text: string): boolean {
    if (text.length === 0) return true;
    if (this.endsHigh && isLow(text.charCodeAt(0))) return false;
    const quoted = JSON.stringify(text);
    const bytes = Buffer.byteLength(quoted, 'utf8') - 2;
    if (this.length + bytes > this.buf.length) {
      const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + bytes));
      this.buf.copy(grown, 0, 0, this.length);
      this.buf = grown;
    }
    this.buf.write(quoted.slice(1, -1), this.length, 'utf8');
    this.length += bytes;
    this.endsHigh = isHigh(text.charCodeAt(text.length - 1));
    return true;
  }

  /** The escape so far: the first `length` bytes of the returned Buffer (later appends never change them). */
  bytes(): Buffer {
    return this.buf;
  }
}

/**
 * What every streaming envelope of one reply shares, as JSON text with its UTF-8 length: made once
 * per reply (the ids, the publisher and the creation date never change within it).
 */
export interface ReplyConstants {
  /** `{"type":"agent_reply","message_id":…,"offset":` */
  open: string;
  openBytes: number;
  /** `,"in_reply_to":…,"publisher_id":…,"state":"streaming","body":"` */
  beforeBody: string;
  beforeBodyBytes: number;
  /** `,"created_at":…,"updated_at":"` */
  dates: string;
  datesBytes: number;
}

const q = JSON.stringify;
const utf8 = (text: string): number => Buffer.byteLength(text, 'utf8');

export const replyConstants = (
  messageId: string,
  inReplyTo: string | undefined,
  publisherId: string,
  createdAt: string,
): ReplyConstants => {
  const open = `{"type":"agent_reply","message_id":${q(messageId)},"offset":`;
  const beforeBody =
    `,${inReplyTo ? `"in_reply_to":${q(inReplyTo)},` : ''}` +
    `"publisher_id":${q(publisherId)},"state":"streaming","body":"`;
  const dates = `,"created_at":${q(createdAt)},"updated_at":"`;
  return {
    open,
    openBytes: utf8(open),
    beforeBody,
    beforeBodyBytes: utf8(beforeBody),
    dates,
    datesBytes: utf8(dates),
  };
};

/** An `agent_reply` in state `streaming` with no extra fields: what every text, thinking and artifact frame makes. */
export interface StreamingReply {
  constants: ReplyConstants;
  offset: number;
  parts: Part[];
  /** An ISO 8601 date: nothing in it needs escaping. */
  updatedAt: string;
  /** The body's escape: `bodyLength` bytes of `body` (taken when projected: later chunks append beyond). */
  body: Buffer;
  bodyLength: number;
}

/** The frame encodeEnvelopeBytes writes for the envelope `reply` describes. */
export const streamingReplyBytes = (reply: StreamingReply): Buffer => {
  const { constants: c } = reply;
  const offset = String(reply.offset);
  const head = `id: ${offset}${MESSAGE_HEAD}`;
  const parts = reply.parts.length === 0 ? '","parts":[]' : `","parts":${q(reply.parts)}`;
  const partsBytes = utf8(parts);
  const tail = `${reply.updatedAt}"}\n\n`;
  const out = Buffer.allocUnsafe(
    head.length +
      c.openBytes +
      offset.length +
      c.beforeBodyBytes +
      reply.bodyLength +
      partsBytes +
      c.datesBytes +
      tail.length,
  );
  let at = out.write(head, 0, 'latin1');
  at += out.write(c.open, at, 'utf8');
  at += out.write(offset, at, 'latin1');
  at += out.write(c.beforeBody, at, 'utf8');
  at += reply.body.copy(out, at, 0, reply.bodyLength);
  at += out.write(parts, at, 'utf8');
  at += out.write(c.dates, at, 'utf8');
  out.write(tail, at, 'latin1');
  return out;
};
