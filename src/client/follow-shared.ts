/**
 * `followMany` with `share`: the tabs of one origin that share a name hold ONE `GET /v1/follow`
 * connection between them. A Web Lock elects the leader. The leader holds the connection for every
 * tab's streams and relays each event over a BroadcastChannel. When the leader's tab goes away, its
 * lock passes to another tab, which opens the connection again from its own cursors.
 *
 * Every tab keeps its own cursors and delivers only streams it follows, from its own cursor:
 * - a stream the leader does not follow yet is added to the connection from the tab's cursor;
 * - a stream the leader already follows is joined if the tab's cursor is the leader's cursor now,
 *   or one of the last events the leader kept for it (those after it are replayed to the tab first);
 * - otherwise, or when the leader cannot be asked, the tab follows that stream on a connection of
 *   its own.
 * So a tab never gets an event twice or misses one, whichever way it is served.
 */
import type {
  FollowManyEvent,
  FollowManyOptions,
  FollowManySubscription,
  FollowState,
  Transport,
} from './types.js';

/** Events the leader keeps per stream so a tab a little behind it can still join. */
const RING = 1000;

type Message =
  | { t: 'hello'; tab: string; streams: Record<string, string> }
  | { t: 'drop'; tab: string; key: string }
  | { t: 'bye'; tab: string }
  | { t: 'leader'; tab: string }
  | { t: 'joined'; tab: string; key: string; events: FollowManyEvent[] }
  | { t: 'own'; tab: string; key: string }
  | { t: 'ev'; ev: FollowManyEvent }
  | { t: 'state'; state: FollowState };

/** The part of the Web Locks API used here (the client compiles without the DOM lib's newest types). */
interface LockManagerLike {
  request(name: string, options: { signal: AbortSignal }, callback: () => Promise<void>): Promise<void>;
}

interface Ring {
  /** The cursor before the first event kept. */
  start: string;
  events: FollowManyEvent[];
}

/** The page globals used here (the client also compiles without the DOM lib). */
const page = globalThis as unknown as {
  navigator?: { locks?: LockManagerLike };
  addEventListener?: (type: string, listener: () => void) => void;
};

/** Whether this browser can share: a BroadcastChannel and Web Locks. */
export const canShare = (): boolean =>
  typeof BroadcastChannel !== 'undefined' && page.navigator?.locks !== undefined;

/**
 * `follow` is `followMany` itself, handed in (it hands the shared case here): each tab's own
 * connection and the leader's are plain followMany subscriptions.
 */
export const followManyShared = (
  options: FollowManyOptions,
  share: string,
  follow: (options: FollowManyOptions) => FollowManySubscription,
): FollowManySubscription => {
  const tab = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
  const channel = new BroadcastChannel(`murmur-gateway.follow.${share}`);
  const cursors = new Map<string, string>(Object.entries(options.streams));
  /** Streams the leader serves this tab. */
  const joined = new Set<string>();
  /** Streams this tab follows on a connection of its own (a cursor the leader could not serve). */
  let own: FollowManySubscription | null = null;
  let closed = false;
  let leading = false;
  const release = new AbortController();
  let stepDown: (() => void) | null = null;

  // Leader state: the one connection, its streams' subscribers (tab ids; this tab is `tab`) and rings.
  let engine: FollowManySubscription | null = null;
  const subscribers = new Map<string, Set<string>>();
  const rings = new Map<string, Ring>();

  const post = (m: Message): void => {
    if (!closed) channel.postMessage(m);
  };
  const deliver = (ev: FollowManyEvent): void => {
    if (!cursors.has(ev.stream)) return;
    cursors.set(ev.stream, ev.cursor);
    options.onEvent(ev);
  };

  const followOwn = (key: string): void => {
    joined.delete(key);
    const cursor = cursors.get(key);
    if (cursor === undefined) return;
    if (own) own.add(key, cursor);
    else
      own = follow({
        ...options,
        streams: { [key]: cursor },
        onEvent: deliver,
        // The shared connection's state is the one a page shows.
        onState: () => undefined,
      });
  };

  // --- leader ---
  const subscribe = (key: string, who: string): void => {
    let set = subscribers.get(key);
    if (!set) subscribers.set(key, (set = new Set()));
    set.add(who);
  };
  const unsubscribe = (key: string, who: string): void => {
    const set = subscribers.get(key);
    if (!set?.delete(who) || set.size > 0) return;
    subscribers.delete(key);
    rings.delete(key);
    engine?.remove(key);
  };
  /** A tab's stream: added to the connection, joined (with the events it lacks), or its own. */
  const register = (who: string, key: string, cursor: string): void => {
    if (!engine) return;
    const ring = rings.get(key);
    if (!ring) {
      rings.set(key, { start: cursor, events: [] });
      subscribe(key, who);
      engine.add(key, cursor);
      if (who === tab) joined.add(key);
      else post({ t: 'joined', tab: who, key, events: [] });
      return;
    }
    let missing: FollowManyEvent[] | null = null;
    if (cursor === engine.cursors[key] || cursor === 'now') missing = [];
    else if (cursor === ring.start) missing = ring.events.slice();
    else {
      const at = ring.events.findIndex((e) => e.cursor === cursor);
      if (at >= 0) missing = ring.events.slice(at + 1);
    }
    if (missing === null) {
      if (who === tab) followOwn(key);
      else post({ t: 'own', tab: who, key });
      return;
    }
    subscribe(key, who);
    if (who === tab) {
      joined.add(key);
      for (const ev of missing) deliver(ev);
    } else post({ t: 'joined', tab: who, key, events: missing });
  };

  const lead = (): Promise<void> =>
    new Promise<void>((resolve) => {
      if (closed) return resolve();
      leading = true;
      stepDown = resolve;
      engine = follow({
        ...options,
        streams: {},
        onEvent: (ev) => {
          const ring = rings.get(ev.stream);
          if (ring) {
            ring.events.push(ev);
            if (ring.events.length > RING) ring.start = ring.events.shift()!.cursor;
          }
          post({ t: 'ev', ev });
          if (joined.has(ev.stream)) deliver(ev);
        },
        onState: (state) => {
          post({ t: 'state', state });
          options.onState?.(state);
        },
      });
      // This tab's streams first (from its own cursors), then every other tab's again.
      joined.clear();
      for (const [key, cursor] of cursors) if (!own || !(key in own.cursors)) register(tab, key, cursor);
      post({ t: 'leader', tab });
    });

  // --- every tab ---
  const hello = (): void => {
    const mine = Object.fromEntries([...cursors].filter(([key]) => !own || !(key in own.cursors)));
    post({ t: 'hello', tab, streams: mine });
  };
  channel.onmessage = (e: { data: unknown }) => {
    if (closed) return;
    const m = e.data as Message;
    if (leading) {
      if (m.t === 'hello')
        for (const [key, cursor] of Object.entries(m.streams)) register(m.tab, key, cursor);
      else if (m.t === 'drop') unsubscribe(m.key, m.tab);
      else if (m.t === 'bye') for (const key of [...subscribers.keys()]) unsubscribe(key, m.tab);
      return;
    }
    if (m.t === 'leader') {
      // A new connection: every stream this tab had joined is registered again from its cursor.
      joined.clear();
      hello();
    } else if (m.t === 'joined' && m.tab === tab && cursors.has(m.key)) {
      joined.add(m.key);
      // Registered twice (a hello crossed a new leader's call): what came since is not replayed again.
      const at = m.events.findIndex((ev) => ev.cursor === cursors.get(m.key));
      for (const ev of at >= 0 ? m.events.slice(at + 1) : m.events) deliver(ev);
    } else if (m.t === 'own' && m.tab === tab) followOwn(m.key);
    else if (m.t === 'ev' && joined.has(m.ev.stream)) deliver(m.ev);
    else if (m.t === 'state') options.onState?.(m.state);
  };

  page
    .navigator!.locks!.request(`murmur-gateway.follow.${share}`, { signal: release.signal }, () => lead())
    .catch(() => undefined);
  // A leader that exists already answers; one still to come asks every tab itself.
  hello();

  const close = (): void => {
    if (closed) return;
    post({ t: 'bye', tab });
    closed = true;
    release.abort();
    engine?.close();
    own?.close();
    channel.close();
    stepDown?.();
    options.onState?.({
      state: 'closed',
      transport: engine?.transport ?? 'sse',
      reason: 'closed by the caller',
    });
  };
  page.addEventListener?.('pagehide', close);

  return {
    get cursors() {
      return Object.fromEntries(cursors);
    },
    get transport(): Transport {
      return engine?.transport ?? own?.transport ?? 'sse';
    },
    add: (key, cursor = '-1') => {
      if (closed || cursors.has(key)) return;
      cursors.set(key, cursor);
      if (leading) register(tab, key, cursor);
      else post({ t: 'hello', tab, streams: { [key]: cursor } });
    },
    remove: (key) => {
      if (closed || !cursors.delete(key)) return;
      joined.delete(key);
      own?.remove(key);
      if (leading) unsubscribe(key, tab);
      else post({ t: 'drop', tab, key });
    },
    close,
  };
};
