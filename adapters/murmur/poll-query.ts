/**
 * The long-poll query (`after`, `wait`, `limit`), validated with zod into numbers, or the one message
 * that names the first bad parameter. Unknown parameters are ignored; limits are the contract's.
 */
import { z } from 'zod';

const POLL_LIMITS = {
  defaultLimit: 100,
  maxLimit: 1000,
  /** Contract: answers "after at most S seconds (max 30)". */
  maxWaitSeconds: 30,
} as const;

/** The exact messages, one per parameter, also asserted by the tests. */
export const POLL_QUERY_MESSAGES = {
  after: 'after must be a non-negative integer',
  wait: `wait must be a number of seconds from 0 to ${POLL_LIMITS.maxWaitSeconds}`,
  limit: `limit must be an integer from 1 to ${POLL_LIMITS.maxLimit}`,
  repeated: (name: string) => `${name} must be given at most once`,
} as const;

export interface PollQuery {
  after: number;
  waitMs: number;
  limit: number;
}

const DIGITS = /^[0-9]+$/;
const DECIMAL = /^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$/;

const integer = (message: string, min: number, max: number) =>
  z
    .string()
    .regex(DIGITS, message)
    .transform(Number)
    .refine((n) => Number.isSafeInteger(n) && n >= min && n <= max, message);

const schema = z.object({
  after: integer(POLL_QUERY_MESSAGES.after, 0, Number.MAX_SAFE_INTEGER).default(0),
  wait: z
    .string()
    .regex(DECIMAL, POLL_QUERY_MESSAGES.wait)
    .transform(Number)
    .refine((s) => s <= POLL_LIMITS.maxWaitSeconds, POLL_QUERY_MESSAGES.wait)
    .default(0),
  limit: integer(POLL_QUERY_MESSAGES.limit, 1, POLL_LIMITS.maxLimit).default(POLL_LIMITS.defaultLimit),
});

const NAMES = ['after', 'wait', 'limit'] as const;

const integerIn = (value: string | undefined, dflt: number, min: number, max: number): number | null => {
  if (value === undefined) return dflt;
  if (!DIGITS.test(value)) return null;
  const n = Number(value);
  return Number.isSafeInteger(n) && n >= min && n <= max ? n : null;
};

/**
 * The schema's answer for a valid query, without zod (a poll storm parses thousands of queries a
 * second); null when anything is off, and the schema then says what.
 */
const quickParse = (single: Partial<Record<(typeof NAMES)[number], string>>): PollQuery | null => {
  const after = integerIn(single.after, 0, 0, Number.MAX_SAFE_INTEGER);
  const limit = integerIn(single.limit, POLL_LIMITS.defaultLimit, 1, POLL_LIMITS.maxLimit);
  let wait = 0;
  if (single.wait !== undefined) {
    if (!DECIMAL.test(single.wait)) return null;
    wait = Number(single.wait);
    if (!(wait <= POLL_LIMITS.maxWaitSeconds)) return null;
  }
  if (after === null || limit === null) return null;
  return { after, limit, waitMs: Math.round(wait * 1000) };
};

/**
 * Parse the query (every value of each key, as `c.req.queries()` gives them). `maxWaitMs` is the
 * configured long-poll ceiling (config.longPollMaxMs), which may be lower than the contract's 30 s.
 */
export const parsePollQuery = (
  queries: Record<string, string[]>,
  maxWaitMs: number,
): { ok: true; query: PollQuery } | { ok: false; message: string } => {
  const single: Partial<Record<(typeof NAMES)[number], string>> = {};
  for (const name of NAMES) {
    const values = queries[name];
    if (!values || values.length === 0) continue;
    if (values.length > 1) return { ok: false, message: POLL_QUERY_MESSAGES.repeated(name) };
    single[name] = values[0];
  }
  const fast = quickParse(single);
  if (fast) return { ok: true, query: { ...fast, waitMs: Math.min(fast.waitMs, maxWaitMs) } };
  const parsed = schema.safeParse(single);
  if (!parsed.success) {
    // Report the first bad parameter in a fixed order, so the message does not depend on zod's.
    const issues = parsed.error.issues;
    const first = NAMES.map((name) => issues.find((issue) => issue.path[0] === name)).find(Boolean);
    return { ok: false, message: first?.message ?? 'invalid query' };
  }
  const { after, wait, limit } = parsed.data;
  return { ok: true, query: { after, limit, waitMs: Math.min(Math.round(wait * 1000), maxWaitMs) } };
};
