/** BeeOS's 400 (`invalid_param`) for a path segment that does not percent-decode. */
import type { Context } from 'hono';
import { HEADER_REQUEST_ID } from './constants.js';
import { BeeosError, errorBody } from './errors.js';
import { requestIdOf } from './http-helpers.js';

export const beeosMalformedPath = (c: Context): Response => {
  const rid = requestIdOf(c);
  const err = new BeeosError('invalid_param', 'malformed percent-encoding in the path');
  return c.json(errorBody(err, rid), 400, { [HEADER_REQUEST_ID]: rid });
};
