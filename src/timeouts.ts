/**
 * One bounded wait for every room: `work`'s outcome, or what `onTimeout` gives once `ms` pass
 * first. The timer is cleared as soon as `work` settles, so a wait that ended early never holds the
 * event loop open nor fires later. `work` itself is not cancelled: a caller that must withdraw it
 * does so after a timeout (with its own AbortSignal).
 */

/**
 * Resolves with `work`'s value, or rejects with its error, when it settles within `ms`; otherwise
 * with `onTimeout()` (undefined by default), or rejects with what `onTimeout` throws.
 */
export function withTimeout<T>(work: PromiseLike<T>, ms: number): Promise<T | undefined>;
export function withTimeout<T, F>(work: PromiseLike<T>, ms: number, onTimeout: () => F): Promise<T | F>;
export function withTimeout<T, F>(
  work: PromiseLike<T>,
  ms: number,
  onTimeout?: () => F,
): Promise<T | F | undefined> {
  return new Promise<T | F | undefined>((resolve, reject) => {
    const timer = setTimeout(() => {
      try {
        resolve(onTimeout?.());
      } catch (err) {
        reject(err as Error);
      }
    }, ms);
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err as Error);
      },
    );
  });
}
