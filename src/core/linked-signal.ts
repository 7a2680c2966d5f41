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

/** The callbacks linked to each source signal, called by its one abort listener. */
const linkedTo = new WeakMap<AbortSignal, Set<() => void>>();

const listen = (source: AbortSignal, fn: () => void): void => {
  let set = linkedTo.get(source);
  if (!set) {
    const callbacks = new Set<() => void>();
    set = callbacks;
    linkedTo.set(source, callbacks);
    source.addEventListener('abort', () => [...callbacks].forEach((f) => f()), { once: true });
  }
  set.add(fn);
};

export const linkSignals = (...sources: AbortSignal[]): LinkedSignal => {
  const controller = new AbortController();
  const release = (): void => {
    for (const source of sources) linkedTo.get(source)?.delete(onAbort);
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
