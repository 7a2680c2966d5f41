/**
 * What a surface (one folder under `adapters/`) hands the assembly: its routes, the one path prefix
 * they all live under, and how it speaks where the shared middleware must answer for it — a path that
 * does not percent-decode, a request past an abuse bound. The assembly, the limits and the connection
 * accounting loop over the list; nothing else names a surface.
 */
import type { Context, Hono } from 'hono';
import type { RateLimitedRenderer } from './limits-middleware.js';

export interface Surface {
  /** The connection label (`/metrics`, `/capsules`). */
  name: string;
  /** Every route of the surface starts with it (e.g. `/flue/`); no two surfaces share one. */
  prefix: string;
  /**
   * The paths that address one capsule, its id the first group: counted as that capsule's
   * connections, and bounded by the per-key stream and submission caps.
   */
  capsulePath?: RegExp;
  /** Full paths, mounted at '/'. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  routes: Hono<any, any, any>;
  /** 400 for a path segment that does not percent-decode; absent: the ops grammar. */
  malformedPath?: (c: Context) => Response;
  /** 429 past an abuse bound (`Retry-After` given); absent: the ops grammar. */
  rateLimited?: RateLimitedRenderer;
}

/** The surface a path belongs to, if any. */
export const surfaceAt = (surfaces: readonly Surface[], path: string): Surface | undefined =>
  surfaces.find((s) => path.startsWith(s.prefix));
