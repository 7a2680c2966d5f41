import { describe, expect, it } from 'vitest';
import { handshakeCounters, handshakeDelta, parseTcpExt } from './tcp-counters.js';

// The shape of /proc/net/netstat: a header line of names, then a line of values, per prefix.
const netstat = (overflows: number, syn: number, zero: number): string =>
  [
    'TcpExt: SyncookiesSent ListenOverflows ListenDrops TCPSynRetrans TCPToZeroWindowAdv',
    `TcpExt: 0 ${overflows} ${overflows} ${syn} ${zero}`,
    'IpExt: InNoRoutes InTruncatedPkts ListenOverflows',
    'IpExt: 1 2 999',
    '',
  ].join('\n');

describe('the resume storm bench reads the kernel TCP counters', () => {
  it('takes the TcpExt values by name, not another prefix that shares a name', () => {
    expect(handshakeCounters(netstat(10215, 7116, 29943))).toEqual({
      listenOverflows: 10215,
      synRetransmits: 7116,
      zeroWindows: 29943,
    });
  });

  it('reports what happened between two readings', () => {
    const before = handshakeCounters(netstat(100, 5, 7));
    const after = handshakeCounters(netstat(10_184, 5, 9_953));
    expect(handshakeDelta(before, after)).toEqual({
      listenOverflows: 10_084,
      synRetransmits: 0,
      zeroWindows: 9_946,
    });
  });

  it('reads zeros from a text without TcpExt lines (not Linux, or a kernel without them)', () => {
    expect(parseTcpExt('IpExt: A B\nIpExt: 1 2\n').size).toBe(0);
    expect(handshakeCounters('')).toEqual({ listenOverflows: 0, synRetransmits: 0, zeroWindows: 0 });
  });

  it('reads this host as numbers where /proc/net/netstat exists', () => {
    const now = handshakeCounters();
    for (const value of Object.values(now)) expect(Number.isFinite(value)).toBe(true);
  });
});
