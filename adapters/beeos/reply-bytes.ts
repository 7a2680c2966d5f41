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
import { EVENT_MESSAGE } from './constants.js';
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

/** An `agent_reply` in state `streaming` with no extra fields: what every text, thinking and artifact frame makes. */
export interface StreamingReply {
  messageId: string;
  offset: number;
  inReplyTo: string | undefined;
  publisherId: string;
  parts: Part[];
  createdAt: string;
  updatedAt: string;
  /** The body's escape: `bodyLength` bytes of `body` (taken when projected: later chunks append beyond). */
  body: Buffer;
  bodyLength: number;
}

const q = JSON.stringify;

/** The frame encodeEnvelopeBytes writes for the envelope `reply` describes. */
export const streamingReplyBytes = (reply: StreamingReply): Buffer => {
  const head =
    `id: ${reply.offset}\nevent: ${EVENT_MESSAGE}\ndata: {"type":"agent_reply","message_id":${q(reply.messageId)},` +
    `"offset":${reply.offset},${reply.inReplyTo ? `"in_reply_to":${q(reply.inReplyTo)},` : ''}` +
    `"publisher_id":${q(reply.publisherId)},"state":"streaming","body":"`;
  const tail = `","parts":${q(reply.parts)},"created_at":${q(reply.createdAt)},"updated_at":${q(reply.updatedAt)}}\n\n`;
  const headBytes = Buffer.byteLength(head, 'utf8');
  const out = Buffer.allocUnsafe(headBytes + reply.bodyLength + Buffer.byteLength(tail, 'utf8'));
  out.write(head, 0, 'utf8');
  reply.body.copy(out, headBytes, 0, reply.bodyLength);
  out.write(tail, headBytes + reply.bodyLength, 'utf8');
  return out;
};
