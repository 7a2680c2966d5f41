/** Response headers every general stream answer shares: offsets, closure, expiry (PROTOCOL.md §5.4). */
import type { StreamMeta } from '../../src/streams/types.js';
import { formatEpochOffset as formatOffset } from '../../src/http/epoch-offset.js';
import { SECURITY_HEADERS } from './stream-errors.js';

/** `Stream-Next-Offset` of `position` in the stream's current epoch. */
export const offsetAt = (meta: StreamMeta, position: number): string => formatOffset(meta.epoch, position);

/** The stream's tail, closure and content type (PUT, POST, HEAD). */
export const metaHeaders = (meta: StreamMeta): Record<string, string> => ({
  ...SECURITY_HEADERS,
  'content-type': meta.contentType,
  'stream-next-offset': offsetAt(meta, meta.tail),
  ...(meta.closed ? { 'stream-closed': 'true' } : {}),
});

/** An append's answer (§5.2): the tail and closure, no content type. */
export const tailHeaders = (meta: StreamMeta): Record<string, string> => {
  const headers: Record<string, string> = {
    ...SECURITY_HEADERS,
    'stream-next-offset': offsetAt(meta, meta.tail),
  };
  if (meta.closed) headers['stream-closed'] = 'true';
  return headers;
};

/** HEAD: remaining TTL and the absolute expiry, when the stream has them. */
export const expiryHeaders = (meta: StreamMeta, nowMs = Date.now()): Record<string, string> => {
  const headers: Record<string, string> = {};
  if (meta.ttlSeconds !== null && meta.expiresAtMs !== null) {
    headers['stream-ttl'] = String(Math.max(0, Math.ceil((meta.expiresAtMs - nowMs) / 1000)));
  }
  if (meta.expiresAt !== null) headers['stream-expires-at'] = meta.expiresAt;
  return headers;
};
