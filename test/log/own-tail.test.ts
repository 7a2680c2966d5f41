/**
 * The tail's wait for this process's own next append (own-tail.ts) is for the replica that ingests
 * the capsule: one that only admitted a submission reads the owner's frames through Redis at once
 * (before, its tail waited for an append of its own that never came, holding the reply's first
 * token back by that wait on every message admitted by a replica that does not own the capsule).
 */
import { describe, expect, it } from 'vitest';
import { OwnTails } from '../../src/log/own-tail.js';
import type { LogRecord } from '../../src/log/record.js';

const submission = (offset: number): LogRecord => ({
  kind: 'submission',
  protocol: 'flue',
  owner: null,
  contextId: 'c',
  messageId: `m${offset}`,
  text: 'hi',
  queued: true,
  receivedAt: Date.now(),
  offset,
});
const frame = (offset: number): LogRecord => ({
  kind: 'frame',
  event: 'text',
  upstreamId: String(offset),
  data: '{}',
  receivedAt: Date.now(),
  offset,
});
const fact = (offset: number): LogRecord => ({
  kind: 'fact',
  fact: 'submission-handed',
  messageId: 'm',
  contextId: 'c',
  receivedAt: Date.now(),
  offset,
});

describe('own tails', () => {
  it('a replica that appended only submissions and facts is not waited for', () => {
    const tails = new OwnTails();
    tails.note('cap', 1, [submission(1)]);
    tails.note('cap', 1, [fact(2)]);
    expect(tails.appendedWithin('cap', 60_000)).toBe(false);
    // Its own records still answer its tail without a Redis call.
    expect(tails.page('cap', 0, 10, 1)?.map((r) => r.offset)).toEqual([1, 2]);
  });

  it('the ingesting replica (it appends frames) is', () => {
    const tails = new OwnTails();
    tails.note('cap', 1, [fact(1), frame(2)]);
    expect(tails.appendedWithin('cap', 60_000)).toBe(true);
    expect(tails.appendedWithin('other', 60_000)).toBe(false);
  });
});
