/**
 * One request's abort signal tied to a long-lived one (the gateway's shutdown signal), undone when the
 * request ends. `AbortSignal.any` on Node 20 keeps every composite it ever made in the source signal's
 * dependant set, so one long-lived shutdown signal grew by one entry per long-poll, forever. And a
 * listener per request on the shutdown signal warns (MaxListenersExceededWarning) from the eleventh
 * request held at once: each source signal gets ONE listener here, whatever number of requests are
 * linked to it (as sse-ends.ts does for SSE streams).
 */
export interface LinkedSignal {
  /** Aborts as soon as any of the linked signals does. */
  readonly signal: AbortSignal;
  /** Remove the listeners from the linked signals; call once the request is over. Idempotent. */
  release(): void;
}

/**
 * The callbacks linked to each source signal and its one abort listener, which is removed with the
 * last link: a signal with no request linked holds nothing of ours.
 */
const linkedTo = new WeakMap<AbortSignal, { callbacks: Set<() => void>; listener: () => void }>();

const listen = (source: AbortSignal, fn: () => void): void => {
  let entry = linkedTo.get(source);
  if (!entry) {
    const callbacks = new Set<() => void>();
    const listener = (): void => {
      linkedTo.delete(source);
      [...callbacks].forEach((f) => f());
    };
    entry = { callbacks, listener };
    linkedTo.set(source, entry);
    source.addEventListener('abort', listener, { once: true });
  }
  entry.callbacks.add(fn);
};

const unlisten = (source: AbortSignal, fn: () => void): void => {
  const entry = linkedTo.get(source);
  if (!entry) return;
  entry.callbacks.delete(fn);
  if (entry.callbacks.size > 0) return;
  linkedTo.delete(source);
  source.removeEventListener('abort', entry.listener);
};

export const linkSignals = (...sources: AbortSignal[]): LinkedSignal => {
  const controller = new AbortController();
  const release = (): void => {
    for (const source of sources) unlisten(source, onAbort);
  };
  const onAbort = (): void => {
    release();
    controller.abort();
  };
  for (const source of sources) {
    if (source.aborted) {
      onAbort();
      break;
    }
    listen(source, onAbort);
  }
  return { signal: controller.signal, release };
};
