/**
 * Pure encodings of the Flue wire: offsets (§Offsets, with the store epoch as the first component,
 * see docs/surfaces/flue.md) and SSE frames (§live=sse). Decisions about what to send live in live.ts/routes.ts.
 */
import { formatEpochOffset, parseEpochOffset } from '../../src/http/epoch-offset.js';
import { encodeComment, encodeSse } from '../../src/http/sse.js';
import type { FlueChunk } from './chunks.js';
import { HEARTBEAT_COMMENT, ORIGIN_OFFSET, SSE_EVENT } from './constants.js';

/** `EEEEEEEEEEEEEEEE_OOOOOOOOOOOOOOOO`: store epoch, then log offset. */
export const formatOffset = formatEpochOffset;

export type ParsedOffset = { kind: 'origin' } | { kind: 'at'; epoch: number; offset: number };

/** Parse a client offset; null when malformed (→ 400 invalid_request). */
export const parseOffset = (raw: string): ParsedOffset | null => {
  if (raw === ORIGIN_OFFSET) return { kind: 'origin' };
  // Well-formed but huge values stay numbers that compare beyond any head/epoch (→ 416, not 400).
  const at = parseEpochOffset(raw);
  return at && { kind: 'at', ...at };
};

/** `event: data` with the cycle's chunk array; Flue writes `data:` with no space. */
export const encodeDataEvent = (chunks: readonly FlueChunk[]): string =>
  encodeSse({ event: SSE_EVENT.data, data: JSON.stringify(chunks) }, '');

/** `event: control` after every read cycle; `upToDate` only ever present as `true`. */
export const encodeControlEvent = (streamNextOffset: string, upToDate: boolean): string =>
  encodeSse(
    {
      event: SSE_EVENT.control,
      data: JSON.stringify(upToDate ? { streamNextOffset, upToDate: true } : { streamNextOffset }),
    },
    '',
  );

export const encodeHeartbeat = (): string => encodeComment(HEARTBEAT_COMMENT);
