/** Flue's 400 (`invalid_request`) for a path segment that does not percent-decode; HEAD gets no body. */
import type { Context } from 'hono';
import { errorResponse, FlueError } from './errors.js';

export const flueMalformedPath = (c: Context): Response =>
  errorResponse(
    new FlueError('invalid_request', 'malformed percent-encoding in the path'),
    c.req.method !== 'HEAD',
  );
