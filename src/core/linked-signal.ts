/**
 * One request's abort signal tied to a long-lived one (the gateway's shutdown signal), undone when the
 * request ends. `AbortSignal.any` on Node 20 keeps every composite it ever made in the source signal's
 * dependant set, so one long-lived shutdown signal grew by one entry per long-poll, forever.
 */
export interface LinkedSignal {
  /** Aborts as soon as any of the linked signals does. */
  readonly signal: AbortSignal;
  /** Remove the listeners from the linked signals; call once the request is over. Idempotent. */
  release(): void;
}

export const linkSignals = (...sources: AbortSignal[]): LinkedSignal => {
  const controller = new AbortController();
  const release = (): void => {
    for (const source of sources) source.removeEventListener('abort', onAbort);
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
    source.addEventListener('abort', onAbort, { once: true });
  }
  return { signal: controller.signal, release };
};
