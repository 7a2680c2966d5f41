import { describe, expect, it } from 'vitest';
import { withTimeout } from '../src/timeouts.js';

const never = new Promise<never>(() => undefined);
const pendingTimers = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

describe('withTimeout', () => {
  it("gives the work's value when it settles first, and clears its timer", async () => {
    const before = pendingTimers();
    const waiting = withTimeout(Promise.resolve('done'), 60_000, () => 'late');
    expect(pendingTimers()).toBe(before + 1);
    await expect(waiting).resolves.toBe('done');
    expect(pendingTimers()).toBe(before);
  });

  it("rejects with the work's own error when it fails first, and clears its timer", async () => {
    const before = pendingTimers();
    const failure = new Error('store refused');
    await expect(withTimeout(Promise.reject(failure), 60_000, () => 'late')).rejects.toBe(failure);
    expect(pendingTimers()).toBe(before);
  });

  it('gives undefined when the time passes first and no fallback is named', async () => {
    await expect(withTimeout(never, 1)).resolves.toBeUndefined();
  });

  it("gives the fallback's value when the time passes first", async () => {
    await expect(withTimeout(never, 1, () => 'timeout' as const)).resolves.toBe('timeout');
  });

  it('rejects with what the fallback throws', async () => {
    const refusal = new Error('did not answer in time');
    await expect(
      withTimeout(never, 1, () => {
        throw refusal;
      }),
    ).rejects.toBe(refusal);
  });

  it('a work that settles after the timeout changes nothing and is not an unhandled rejection', async () => {
    let fail!: (err: Error) => void;
    const late = new Promise<string>((_resolve, reject) => (fail = reject));
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      await expect(withTimeout(late, 1, () => 'timeout')).resolves.toBe('timeout');
      fail(new Error('too late'));
      // Rejections are reported after the microtask queue drains: give it a macrotask.
      await new Promise<void>((r) => setImmediate(r));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
