/**
 * Per-line request checks of the door that look at raw headers: the door token (0.5+ wants exactly
 * one `Authorization` header) and the A2A 1.0 `A2A-Version` header. node:http keeps only the first
 * `Authorization` and joins repeated unknown headers, so both count `rawHeaders` instead.
 */
import type { IncomingMessage } from 'node:http';

/** Every value sent for a header, in order, however often it was repeated. */
const headerValues = (req: IncomingMessage, name: string): string[] => {
  const values: string[] = [];
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) {
    if (req.rawHeaders[i]?.toLowerCase() === name) values.push(req.rawHeaders[i + 1] ?? '');
  }
  return values;
};

/**
 * Whether the request may pass the door. The spec's line compares the (first) header only; 0.5+
 * refuses a request with two Authorization headers even when one of them is right.
 */
export const authorized = (req: IncomingMessage, token: string | null, strict: boolean): boolean => {
  if (token === null) return true;
  if (!strict) return req.headers.authorization === `Bearer ${token}`;
  const values = headerValues(req, 'authorization');
  return values.length === 1 && values[0] === `Bearer ${token}`;
};

/** 1.0: exactly one `A2A-Version` header whose value is `1.0` or `1.0.<n>`. */
export const a2aVersionOk = (req: IncomingMessage): boolean => {
  const values = headerValues(req, 'a2a-version');
  return values.length === 1 && /^1\.0(\.[0-9]+)?$/.test((values[0] ?? '').trim());
};
