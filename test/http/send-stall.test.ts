/**
 * The send-stall watch's reading of the kernel's TCP table: a socket counts as unacknowledged only
 * while its retransmission timer runs with retransmissions already fired (timer 1, retrnsmt > 0);
 * a socket merely waiting for an ACK (timer 1, no retransmission yet), idle, or probing keep-alive
 * (timer 2) does not. The behaviour end to end (a client cut by a DROP rule is closed) is in
 * test/fleet/partitions.test.ts.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { unacknowledgedInodes } from '../../src/http/send-stall.js';

const HEADER =
  '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode';
const row = (sl: number, tr: string, retrnsmt: string, inode: number): string =>
  `  ${sl}: 0100007F:1F90 0100007F:D2F4 01 00000120:00000000 ${tr} ${retrnsmt}     0        0 ${inode} 1 0000000000000000 20 4 30 10 -1`;

describe('unacknowledgedInodes', () => {
  it('names the sockets whose retransmission timer fired without an ACK, in both tables', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mg-tcp-'));
    const v4 = join(dir, 'tcp');
    const v6 = join(dir, 'tcp6');
    writeFileSync(
      v4,
      [
        HEADER,
        row(0, '01:00000014', '00000003', 1001), // retransmitting: stalled
        row(1, '01:00000014', '00000000', 1002), // in flight, no retransmission yet
        row(2, '00:00000000', '00000000', 1003), // idle
        row(3, '02:000003E8', '00000000', 1004), // keep-alive timer
      ].join('\n') + '\n',
    );
    writeFileSync(v6, [HEADER, row(0, '01:00000020', '00000001', 2001)].join('\n') + '\n');
    expect(await unacknowledgedInodes([v4, v6])).toEqual(new Set(['1001', '2001']));
  });

  it('reads a table far larger than one read, lines split across reads, wide slot numbers included', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mg-tcp-'));
    const v4 = join(dir, 'tcp');
    // 40,000 sockets (20,000 connections, both ends on loopback): about 6 MB, read in 128 KB pieces.
    const lines = [HEADER];
    const want = new Set<string>();
    for (let sl = 0; sl < 40_000; sl++) {
      const stalled = sl % 997 === 0;
      if (stalled) want.add(String(100_000 + sl));
      lines.push(
        row(sl, stalled ? '01:00000014' : '00:00000000', stalled ? '00000002' : '00000000', 100_000 + sl),
      );
    }
    // The last line without its newline still counts.
    writeFileSync(v4, lines.join('\n'));
    const got = await unacknowledgedInodes([v4]);
    expect(got).toEqual(want);
    expect(got!.has('139880')).toBe(true);
  });

  it('leaves the event loop free between slices of a table read synchronously', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mg-tcp-'));
    const v4 = join(dir, 'tcp');
    // About 10 MB: more than 64 reads of 128 KB, so the scan takes at least two turns of the loop.
    const lines = [HEADER];
    for (let sl = 0; sl < 70_000; sl++) lines.push(row(sl, '00:00000000', '00000000', 100_000 + sl));
    writeFileSync(v4, lines.join('\n') + '\n');
    let turned = false;
    setImmediate(() => (turned = true));
    const got = await unacknowledgedInodes([v4]).then((set) => ({ set, turnedFirst: turned }));
    expect(got).toEqual({ set: new Set(), turnedFirst: true });
  });

  it('is null when no table can be read (not Linux): nothing is watched', async () => {
    expect(await unacknowledgedInodes(['/nonexistent/tcp'])).toBeNull();
  });
});
