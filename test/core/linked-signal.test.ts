/**
 * linkSignals: many requests tied to one long-lived signal (the gateway's shutdown) add ONE listener
 * to it, not one each (the eleventh held long-poll used to warn MaxListenersExceededWarning); each
 * still aborts with it, and a released one does not.
 */
import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { linkSignals } from '../../src/core/linked-signal.js';

describe('linkSignals', () => {
  it('ties twenty requests to one shutdown signal with one listener; all abort with it but the released', () => {
    const shutdown = new AbortController();
    const requests = Array.from({ length: 20 }, () => new AbortController());
    const linked = requests.map((r) => linkSignals(r.signal, shutdown.signal));
    expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(1);
    expect(requests.every((r) => getEventListeners(r.signal, 'abort').length === 1)).toBe(true);
    linked[0]!.release();
    // A request's own abort aborts only its link.
    requests[1]!.abort();
    expect(linked.map((l) => l.signal.aborted)).toEqual(linked.map((_, i) => i === 1));
    shutdown.abort();
    expect(linked.map((l) => l.signal.aborted)).toEqual(linked.map((_, i) => i !== 0));
  });

  it('leaves nothing on the long-lived signal once every link is released, and links again after', () => {
    const shutdown = new AbortController();
    const links = Array.from({ length: 5 }, () => linkSignals(new AbortController().signal, shutdown.signal));
    expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(1);
    links.forEach((l) => l.release());
    expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(0);
    const again = linkSignals(shutdown.signal);
    expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(1);
    shutdown.abort();
    expect(again.signal.aborted).toBe(true);
  });

  it('is aborted at once when a signal already is', () => {
    const done = new AbortController();
    done.abort();
    expect(linkSignals(new AbortController().signal, done.signal).signal.aborted).toBe(true);
  });
});
