/**
 * Which webhook receivers the gateway may call (Durable Streams PROTOCOL.md §7 SSRF rules, A2A
 * §13.2): one policy for every webhook the gateway sends: http(s) only, and never
 * a private (RFC 1918, unique-local), loopback, link-local, unspecified or otherwise internal
 * address, checked on the literal host at create and on every address the name resolves to at
 * delivery (a name that later resolves inward is refused then). `allowLoopback` admits loopback
 * receivers (development and tests); `allowHosts` admits the hosts listed, whatever they resolve to.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';

export interface ReceiverPolicy {
  allowLoopback: boolean;
  /** Host names or literal addresses admitted as they are (lower case). */
  allowHosts: string[];
}

/** How a refusal names the URL's field and the setting that admits loopback, per surface. */
export interface ReceiverNames {
  field: string;
  loopbackSetting: string;
}

const DURABLE_STREAMS_NAMES: ReceiverNames = {
  field: 'webhook.url',
  loopbackSetting: 'webhooks.allowLoopback',
};

const v4 = (ip: string): number[] => ip.split('.').map(Number);

/** 'loopback', 'internal' (never called) or 'public'. */
export const addressClass = (ip: string): 'loopback' | 'internal' | 'public' => {
  let addr = ip.toLowerCase();
  // IPv4-mapped IPv6 is the IPv4 address; the URL parser writes it in hex (`::ffff:a00:1`).
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(addr);
  const mappedHex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(addr);
  if (mapped) addr = mapped[1]!;
  else if (mappedHex) {
    const hi = parseInt(mappedHex[1]!, 16);
    const lo = parseInt(mappedHex[2]!, 16);
    addr = [hi >> 8, hi & 255, lo >> 8, lo & 255].join('.');
  }
  if (isIP(addr) === 4) {
    const [a, b] = v4(addr) as [number, number];
    if (a === 127) return 'loopback';
    if (a === 10 || a === 0 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168))
      return 'internal';
    if ((a === 169 && b === 254) || (a === 100 && b >= 64 && b <= 127) || a >= 224) return 'internal';
    return 'public';
  }
  if (addr === '::1') return 'loopback';
  if (addr === '::' || /^f[cd]/.test(addr) || /^fe[89ab]/.test(addr) || /^ff/.test(addr)) return 'internal';
  return 'public';
};

export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string };

const hostOf = (url: URL): string => url.hostname.replace(/^\[|\]$/g, '').toLowerCase();

/** At create: the URL's form and its literal host. */
export const checkReceiverUrl = (
  raw: string,
  policy: ReceiverPolicy,
  names: ReceiverNames = DURABLE_STREAMS_NAMES,
): UrlCheck => {
  const { field } = names;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: `${field} is not a URL` };
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    return { ok: false, reason: `${field} must be http or https` };
  if (url.username || url.password) return { ok: false, reason: `${field} must not carry credentials` };
  const host = hostOf(url);
  if (policy.allowHosts.includes(host)) return { ok: true, url };
  const cls =
    host === 'localhost' || host.endsWith('.localhost')
      ? 'loopback'
      : isIP(host)
        ? addressClass(host)
        : 'public';
  if (cls === 'loopback' && !policy.allowLoopback)
    return { ok: false, reason: `${field} is a loopback address (${names.loopbackSetting} is off)` };
  if (cls === 'internal')
    return { ok: false, reason: `${field} is a private, link-local or internal address` };
  return { ok: true, url };
};

/** At delivery: every address the host resolves to must be admitted too. */
export const receiverReachable = async (
  url: URL,
  policy: ReceiverPolicy,
  names?: ReceiverNames,
): Promise<UrlCheck> => {
  const first = checkReceiverUrl(url.href, policy, names);
  if (!first.ok) return first;
  const host = hostOf(url);
  if (policy.allowHosts.includes(host) || isIP(host)) return first;
  const addresses = await lookup(host, { all: true });
  for (const { address } of addresses) {
    const cls = addressClass(address);
    if (cls === 'internal' || (cls === 'loopback' && !policy.allowLoopback))
      return { ok: false, reason: `webhook host resolves to ${address}` };
  }
  return first;
};
