/**
 * The client's address behind a load balancer (`trustProxy`). Only hops the operator vouches for are
 * believed: X-Forwarded-For is client-writable, so its leftmost entry is never taken on faith.
 * `false`: the socket peer. A number N: the address N hops back (the last N entries were appended by
 * the N proxies in front). A list of addresses/CIDRs: walking from the socket peer leftwards through
 * X-Forwarded-For, the first address that is not a trusted proxy.
 */
import { BlockList, isIP } from 'node:net';
import type { Context } from 'hono';

export type TrustProxy = false | number | string[];

/** `::ffff:127.0.0.1` → `127.0.0.1`, so one client has one key whichever stack it came over. */
const normalize = (ip: string): string =>
  ip.startsWith('::ffff:') && isIP(ip.slice(7)) === 4 ? ip.slice(7) : ip;

/** What the resolver reads of a request: its socket peer and its X-Forwarded-For header. */
export interface RequestOrigin {
  peer: string | undefined;
  forwardedFor: string | undefined;
}

const socketPeer = (o: RequestOrigin): string => normalize(o.peer ?? 'unknown');

const forwardedHops = (o: RequestOrigin): string[] =>
  (o.forwardedFor ?? '')
    .split(',')
    .map((s) => normalize(s.trim()))
    .filter((s) => isIP(s) !== 0);

const trustedList = (entries: string[]): BlockList => {
  const list = new BlockList();
  for (const entry of entries) {
    const [addr = '', bits] = entry.split('/');
    const family = isIP(addr);
    if (family === 0) throw new Error(`trustProxy: "${entry}" is not an IP address or CIDR`);
    const type = family === 4 ? 'ipv4' : 'ipv6';
    if (bits === undefined) list.addAddress(addr, type);
    else list.addSubnet(addr, Number(bits), type);
  }
  return list;
};

/**
 * Build the resolver once at start; throws on an unusable trustProxy entry (a config error). Takes
 * the request's origin, so a route served straight from Node's request (direct-routes.ts) resolves
 * the same address as one served through Hono (clientIpResolver).
 */
export const originIpResolver = (trust: TrustProxy): ((o: RequestOrigin) => string) => {
  if (trust === false) return socketPeer;
  if (typeof trust === 'number') {
    return (o) => {
      // The socket peer is proxy 1; each further proxy appended the address it received from.
      const chain = [...forwardedHops(o), socketPeer(o)];
      return chain[Math.max(0, chain.length - 1 - trust)] ?? socketPeer(o);
    };
  }
  const trusted = trustedList(trust);
  const isTrusted = (ip: string): boolean => {
    const family = isIP(ip);
    return family !== 0 && trusted.check(ip, family === 4 ? 'ipv4' : 'ipv6');
  };
  return (o) => {
    const chain = [...forwardedHops(o), socketPeer(o)];
    for (let i = chain.length - 1; i >= 0; i--) if (!isTrusted(chain[i]!)) return chain[i]!;
    return chain[0] ?? socketPeer(o);
  };
};

/** The socket peer of a request served through Hono on Node (none under `app.request`). */
const peerOf = (c: Context): string | undefined =>
  (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming?.socket
    ?.remoteAddress;

/** originIpResolver for a Hono request. */
export const clientIpResolver = (trust: TrustProxy): ((c: Context) => string) => {
  const resolve = originIpResolver(trust);
  // The socket peer alone: X-Forwarded-For is not even read.
  if (trust === false) return (c) => resolve({ peer: peerOf(c), forwardedFor: undefined });
  return (c) => resolve({ peer: peerOf(c), forwardedFor: c.req.header('x-forwarded-for') });
};
