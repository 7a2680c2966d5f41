/**
 * The page side of the followMany tests, as plain JS evaluated in the page (vitest transforms
 * functions, so none is passed). It loads the client module the gateway serves and follows many
 * streams over one connection, keeping every stream's cursor and every delivered event in
 * sessionStorage: a reload resumes every stream from its cursor, and the test reads everything
 * every life of the page delivered.
 */
export interface PageFollowManyArgs {
  /** Stream key → cursor to start from (used when the page has no saved cursors). */
  streams: Record<string, string>;
  transport: 'auto' | 'sse' | 'long-poll';
  tuning?: Record<string, number>;
  /** Share one connection with the other tabs of the origin that use this name. */
  share?: string;
}

export const PAGE_FOLLOW_MANY = `async (args) => {
  let mod = null;
  // The proxy may cut the very connection this import rides on: try again.
  for (let i = 0; i < 10 && !mod; i++) {
    try { mod = await import(location.origin + '/client/murmur-gateway.js'); }
    catch { await new Promise((r) => setTimeout(r, 100)); }
  }
  if (!mod) throw new Error('could not load the client module');
  const saved = sessionStorage.getItem('cursors');
  window.__states = [];
  window.__sub = mod.followMany({
    gateway: location.origin,
    streams: saved !== null ? JSON.parse(saved) : args.streams,
    transport: args.transport,
    ...(args.tuning ? { tuning: args.tuning } : {}),
    ...(args.share ? { share: args.share } : {}),
    onEvent(e) {
      const n = Number(sessionStorage.getItem('count') ?? '0');
      sessionStorage.setItem('ev:' + n, JSON.stringify(e));
      sessionStorage.setItem('count', String(n + 1));
      sessionStorage.setItem('cursors', JSON.stringify(window.__sub.cursors));
    },
    onState(s) { window.__states.push(s); },
  });
}`;

/** Everything the page delivered, in delivery order, from sessionStorage. */
export const PAGE_EVENTS = `() => {
  const n = Number(sessionStorage.getItem('count') ?? '0');
  return Array.from({ length: n }, (_, i) => JSON.parse(sessionStorage.getItem('ev:' + i)));
}`;
