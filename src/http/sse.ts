/**
 * The one SSE encoder. Frames are `\n`-terminated lines, ending with a blank line. Data is split on
 * CR, LF or CRLF into `data:` lines; `event` and `id` may not contain line breaks. Upstream Murmur
 * data lines are already single lines and pass through byte for byte.
 */

export interface SseFrame {
  id?: string | number | null;
  event?: string | null;
  data: string;
}

const LINE_BREAK = /\r\n|\r|\n/;

const assertSingleLine = (field: string, value: string): void => {
  if (LINE_BREAK.test(value)) throw new Error(`SSE ${field} must not contain a line break`);
};

/**
 * Encode one frame. `separator` is the text after `data:`; Murmur writes `data: {…}` (one space),
 * Flue writes `data:[…]` (none), so it is the caller's choice.
 */
export const encodeSse = (frame: SseFrame, separator = ' '): string => {
  let out = '';
  if (frame.id !== undefined && frame.id !== null) {
    const id = String(frame.id);
    assertSingleLine('id', id);
    out += `id: ${id}\n`;
  }
  if (frame.event) {
    assertSingleLine('event', frame.event);
    out += `event: ${frame.event}\n`;
  }
  const { data } = frame;
  // JSON never holds a raw line break: most data is one line, written without splitting (a regex
  // split copied every envelope, BeeOS's cumulative ones included, once more per encode).
  if (data.indexOf('\n') === -1 && data.indexOf('\r') === -1) return `${out}data:${separator}${data}\n\n`;
  for (const line of data.split(LINE_BREAK)) out += `data:${separator}${line}\n`;
  return out + '\n';
};

/** An SSE comment, e.g. `:heartbeat` (Murmur) or `: keepalive` (BeeOS). `text` includes any space. */
export const encodeComment = (text: string): string => {
  assertSingleLine('comment', text);
  return `:${text}\n\n`;
};

/** A frame as the bytes the transport writes (src/http/sse-transport.ts takes Buffers). */
export const encodeSseBytes = (frame: SseFrame, separator = ' '): Buffer =>
  Buffer.from(encodeSse(frame, separator), 'utf8');

/** A comment as bytes, e.g. a heartbeat encoded once per process. */
export const encodeCommentBytes = (text: string): Buffer => Buffer.from(encodeComment(text), 'utf8');
