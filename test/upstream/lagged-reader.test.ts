/**
 * A reader that falls behind a 0.4+ capsule: the gateway's whole process stopped (SIGSTOP) while the
 * capsule writes a burst of large frames, so its connection's queue overflows and the capsule drops
 * frames from it, saying so in a `lagged` frame. The gateway must reconnect and replay what the
 * 512-frame buffer still holds; only what it no longer holds may be missing, flagged with the count
 * the ids prove; `lagged` itself never enters the log.
 */
import { describe, expect, it } from 'vitest';
import { redisServerAvailable } from '../support/redis-server.js';
import { behindRig, writeWhileStopped } from './behind-rig.js';
import { compareLog, readAll } from './log-vs-written.js';

const haveRedis = redisServerAvailable() || process.env.REQUIRE_REDIS === '1';
const attach = behindRig('behind');

describe.skipIf(!haveRedis)('a reader that falls behind a 0.4 capsule', () => {
  it(
    'within the buffer: reconnects on `lagged` and replays, nothing missing',
    { timeout: 60_000 },
    async () => {
      const rig = await attach('0.4');
      const { s } = rig;
      // Under 512 frames in all: whatever the connection lost, the buffer still holds.
      await writeWhileStopped(rig, [{ chunks: 450, chunkBytes: 16_384 }]);
      const records = await readAll(rig.st, rig.capsule);
      const cmp = compareLog(records, s.written);
      expect(cmp.problems).toEqual([]);
      expect(cmp.covered).toEqual([]);
      expect(cmp.matched).toBe(s.written.length);
      expect(records.filter((r) => r.kind === 'fact' && r.fact === 'frames-possibly-missing')).toEqual([]);
      expect(records.some((r) => r.kind === 'frame' && r.event === 'lagged')).toBe(false);
      // The `lagged` frame ended the connection: a reconnect, said in the log as the connection's end.
      expect(
        records.some((r) => r.kind === 'fact' && r.fact === 'upstream-lost' && r.reason === 'lagged'),
      ).toBe(true);
    },
  );

  it(
    'past the buffer: only what it no longer holds is missing, flagged with the exact count',
    { timeout: 60_000 },
    async () => {
      const rig = await attach('0.4');
      const { s } = rig;
      await writeWhileStopped(rig, [{ chunks: 1500, chunkBytes: 4096 }]);
      const records = await readAll(rig.st, rig.capsule);
      const cmp = compareLog(records, s.written);
      expect(cmp.problems).toEqual([]);
      expect(cmp.covered.length).toBeGreaterThan(0);
      const facts = records.flatMap((r) =>
        r.kind === 'fact' && r.fact === 'frames-possibly-missing'
          ? [{ reason: r.reason, count: r.count }]
          : [],
      );
      expect(facts.map((f) => f.reason)).toEqual(['lagged']);
      // The fact's count is the number of frames the log lacks, no more, no less.
      expect(facts[0]!.count).toBe(cmp.covered.length);
      expect(cmp.matched + cmp.covered.length).toBe(s.written.length);
      // What the buffer held at the reconnect was replayed: at least its 512 newest frames before the end.
      expect(cmp.matched).toBeGreaterThanOrEqual(512);
      expect(records.some((r) => r.kind === 'frame' && r.event === 'lagged')).toBe(false);
    },
  );
});
