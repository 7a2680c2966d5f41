/**
 * The poll query parser: valid queries take a path without zod (poll-query.ts quickParse); both paths
 * must agree, so the edges are pinned here: what parses, to what, and what is refused with which message.
 */
import { describe, expect, it } from 'vitest';
import { parsePollQuery, POLL_QUERY_MESSAGES as M } from '../../../adapters/murmur/poll-query.js';

const parse = (q: Record<string, string>, maxWaitMs = 30_000) =>
  parsePollQuery(Object.fromEntries(Object.entries(q).map(([k, v]) => [k, [v]])), maxWaitMs);

describe('poll query', () => {
  it('parses valid queries with the defaults', () => {
    expect(parse({})).toEqual({ ok: true, query: { after: 0, limit: 100, waitMs: 0 } });
    expect(parse({ after: '030', limit: '1000', wait: '0.5' })).toEqual({
      ok: true,
      query: { after: 30, limit: 1000, waitMs: 500 },
    });
    expect(parse({ after: '9007199254740991', wait: '.25', limit: '1' })).toEqual({
      ok: true,
      query: { after: 9007199254740991, limit: 1, waitMs: 250 },
    });
    expect(parse({ wait: '30.0' }, 10_000)).toEqual({
      ok: true,
      query: { after: 0, limit: 100, waitMs: 10_000 },
    });
    expect(parse({ wait: '7.' })).toEqual({ ok: true, query: { after: 0, limit: 100, waitMs: 7000 } });
    expect(parse({ other: 'x', after: '5' })).toEqual({
      ok: true,
      query: { after: 5, limit: 100, waitMs: 0 },
    });
  });

  it('refuses the rest with the message of the first bad parameter', () => {
    const refused = (q: Record<string, string>) => parse(q) as { ok: false; message: string };
    expect(refused({ after: '-1' }).message).toBe(M.after);
    expect(refused({ after: '' }).message).toBe(M.after);
    expect(refused({ after: '1.0' }).message).toBe(M.after);
    expect(refused({ after: '9007199254740992' }).message).toBe(M.after);
    expect(refused({ limit: '0' }).message).toBe(M.limit);
    expect(refused({ limit: '1001' }).message).toBe(M.limit);
    expect(refused({ wait: '30.1' }).message).toBe(M.wait);
    expect(refused({ wait: '1e1' }).message).toBe(M.wait);
    expect(refused({ wait: '.' }).message).toBe(M.wait);
    expect(refused({ after: 'x', limit: '0', wait: '-1' }).message).toBe(M.after);
    expect(refused({ limit: '0', wait: '-1' }).message).toBe(M.wait);
    expect(parsePollQuery({ after: ['1', '2'] }, 30_000)).toEqual({
      ok: false,
      message: M.repeated('after'),
    });
  });
});
