/**
 * The kernel's TCP handshake counters (/proc/net/netstat, this network namespace), read around a
 * storm of connects: a listen queue that overflowed drops the handshake's last ACK, and the client
 * is served only after TCP retransmits (1 s, then 3 s…). That is the kernel's accept queue
 * (`net.core.somaxconn` caps the gateway's requested backlog), not the gateway's pace, and a storm
 * figure that includes it should say so.
 */
import { readFileSync } from 'node:fs';

export interface HandshakeCounters {
  /** Completed handshakes dropped because the accept queue was full. */
  listenOverflows: number;
  /** SYNs the connecting side sent again (its first went unanswered). */
  synRetransmits: number;
  /**
   * Times a receiver advertised a zero window: a client that did not read fast enough stopped the
   * sender until it read (loopback's 64 KB MSS makes the reopening late: the sender may wait for its
   * window probe, 200 ms or more). Clients setting the pace, not the gateway.
   */
  zeroWindows: number;
}

/**
 * Name → value of the `TcpExt:` header/value line pair of /proc/net/netstat's text (empty when it
 * has none). The header line comes first; its values are the next line with the same prefix.
 */
export const parseTcpExt = (text: string): Map<string, number> => {
  const lines = text.split('\n');
  const at = lines.findIndex((l) => l.startsWith('TcpExt:'));
  if (at < 0 || !lines[at + 1]?.startsWith('TcpExt:')) return new Map();
  const names = lines[at]!.trim().split(/\s+/).slice(1);
  const values = lines[at + 1]!.trim().split(/\s+/).slice(1).map(Number);
  return new Map(names.map((n, i) => [n, values[i] ?? 0]));
};

/** The counters now, from `netstat` (default: this host's /proc/net/netstat; zeros where missing). */
export const handshakeCounters = (netstat?: string): HandshakeCounters => {
  try {
    const ext = parseTcpExt(netstat ?? readFileSync('/proc/net/netstat', 'utf8'));
    return {
      listenOverflows: ext.get('ListenOverflows') ?? 0,
      synRetransmits: ext.get('TCPSynRetrans') ?? 0,
      zeroWindows: ext.get('TCPToZeroWindowAdv') ?? 0,
    };
  } catch {
    return { listenOverflows: 0, synRetransmits: 0, zeroWindows: 0 };
  }
};

export const handshakeDelta = (a: HandshakeCounters, b: HandshakeCounters): HandshakeCounters => ({
  listenOverflows: b.listenOverflows - a.listenOverflows,
  synRetransmits: b.synRetransmits - a.synRetransmits,
  zeroWindows: b.zeroWindows - a.zeroWindows,
});
