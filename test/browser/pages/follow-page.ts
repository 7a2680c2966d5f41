/**
 * The page side of the followCapsule tests, as plain JS evaluated in the page (vitest transforms
 * functions, so none is passed). It loads the client module the gateway serves and follows a
 * capsule, keeping the cursor and every delivered record (the poll's JSON, facts included) in sessionStorage: a reload resumes from
 * the cursor, and the test reads everything every life of the page delivered.
 */
export interface PageFollowArgs {
  capsule: string;
  transport: 'auto' | 'sse' | 'long-poll';
  tuning?: Record<string, number>;
  /** A key: Bearer on fetches; with `useEventSource`, tickets fetched with it. */
  token?: string;
  useEventSource?: boolean;
  /** Run the page's clock this many milliseconds off the gateway's (negative: behind). */
  skewMs?: number;
}

export const PAGE_FOLLOW = `async (args) => {
  if (args.skewMs) {
    const now = Date.now.bind(Date);
    Date.now = () => now() + args.skewMs;
  }
  let mod = null;
  // The proxy may cut the very connection this import rides on: try again.
  for (let i = 0; i < 10 && !mod; i++) {
    try { mod = await import(location.origin + '/client/murmur-gateway.js'); }
    catch { await new Promise((r) => setTimeout(r, 100)); }
  }
  if (!mod) throw new Error('could not load the client module');
  const saved = sessionStorage.getItem('cursor');
  window.__states = [];
  window.__sub = mod.followCapsule({
    gateway: location.origin,
    capsule: args.capsule,
    transport: args.transport,
    ...(saved !== null ? { after: Number(saved) } : {}),
    ...(args.tuning ? { tuning: args.tuning } : {}),
    ...(args.token ? { token: args.token } : {}),
    ...(args.useEventSource ? { useEventSource: true } : {}),
    onRecord(r) {
      const n = Number(sessionStorage.getItem('count') ?? '0');
      sessionStorage.setItem('rec:' + n, JSON.stringify(r));
      sessionStorage.setItem('count', String(n + 1));
      sessionStorage.setItem('cursor', String(r.offset));
      if (r.kind === 'frame') window.__last = { event: r.event, data: r.data };
    },
    onState(s) { window.__states.push(s); },
  });
}`;

/** Everything the page delivered, in delivery order, from sessionStorage. */
export const PAGE_RECORDS = `() => {
  const n = Number(sessionStorage.getItem('count') ?? '0');
  return Array.from({ length: n }, (_, i) => JSON.parse(sessionStorage.getItem('rec:' + i)));
}`;
