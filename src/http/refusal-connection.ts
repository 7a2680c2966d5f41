/**
 * A refusal answered before its request body arrived (413 for a body over the bound, 401 before
 * reading an upload, …) says `Connection: close`. Otherwise the answer went out as keep-alive while
 * the body was still coming; node-server then reads the rest for at most 500 ms and drops the socket,
 * and a pooled client that had already sent its next request on that connection lost it ("socket
 * hang up"). With `Connection: close` the client knows the connection ends with this answer.
 */
import type { MiddlewareHandler } from 'hono';

type NodeEnv = { incoming?: { complete?: boolean; httpVersionMajor?: number } } | undefined;

export const closeAfterUnreadRefusal: MiddlewareHandler = async (c, next) => {
  await next();
  const incoming = (c.env as NodeEnv)?.incoming;
  if (!incoming || incoming.complete !== false || c.res.status < 400) return;
  // HTTP/2 has no Connection header (a stream is reset instead, the connection lives on).
  if (incoming.httpVersionMajor === 2) return;
  c.res.headers.set('connection', 'close');
};
