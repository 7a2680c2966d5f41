/**
 * A path segment whose percent-encoding does not decode (`%E0%A4%A`, `%zz`) is bad input, answered
 * 400 in the grammar of the surface it was sent to. Without this, the router hands the raw text on as
 * if it were a name (Hono keeps a segment it cannot decode), and a conversation or task id such as
 * `%E0%A4%A` would be admitted under a name no client could have meant.
 */
import type { Context, MiddlewareHandler } from 'hono';
import { surfaceAt, type Surface } from './surface.js';

/** Whether some segment of a raw (still encoded) path fails to percent-decode. */
const hasMalformedSegment = (rawPath: string): boolean =>
  rawPath.split('/').some((segment) => {
    if (!segment.includes('%')) return false;
    try {
      decodeURIComponent(segment);
      return false;
    } catch {
      return true;
    }
  });

/** The raw path of a request as sent: the URL parser keeps escapes as they came. */
const rawPathOf = (url: string): string => {
  try {
    return new URL(url).pathname;
  } catch {
    return '';
  }
};

const opsMalformedPath = (c: Context): Response =>
  c.json({ error: { code: 'bad_request', message: 'malformed percent-encoding in the path' } }, 400);

export const createMalformedPathGuard = (surfaces: readonly Surface[]): MiddlewareHandler => {
  const renderFor = (path: string): ((c: Context) => Response) =>
    surfaceAt(surfaces, path)?.malformedPath ?? opsMalformedPath;
  return async (c, next) => {
    // Most requests carry no escape at all: no URL parse for them.
    if (!c.req.url.includes('%')) return next();
    const raw = rawPathOf(c.req.url);
    if (!hasMalformedSegment(raw)) return next();
    return renderFor(raw)(c);
  };
};
