import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config/schema.js';
import { startGateway, type RunningGateway } from '../../src/gateway.js';
import {
  backlogWarning,
  kernelBacklogCap,
  LISTEN_BACKLOG,
  SOMAXCONN_FILE,
} from '../../src/http/listen-backlog.js';

const dir = mkdtempSync(join(tmpdir(), 'mg-backlog-'));
const capFile = (name: string, text: string): string => {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
};

const LOW_WARNING =
  'net.core.somaxconn is 128: the kernel queues at most 128 connections for accept (the gateway asks ' +
  'for 65535), so clients reconnecting at once past that lose their handshake and wait for TCP to ' +
  'retry (1 s or more); raise it with sysctl -w net.core.somaxconn=65535';

describe('the kernel cap on the accept backlog', () => {
  it('is read from somaxconn, and is null where it cannot be', () => {
    expect(kernelBacklogCap(capFile('old', '128\n'))).toBe(128);
    expect(kernelBacklogCap(capFile('new', '4096\n'))).toBe(4096);
    expect(kernelBacklogCap(capFile('junk', 'lots\n'))).toBeNull();
    expect(kernelBacklogCap(capFile('zero', '0\n'))).toBeNull();
    expect(kernelBacklogCap(join(dir, 'missing'))).toBeNull();
  });

  it("reads this host's cap as a positive integer on Linux", () => {
    const cap = kernelBacklogCap();
    if (process.platform === 'linux') expect(cap).toBeGreaterThan(0);
    else expect(cap).toBeNull();
    expect(SOMAXCONN_FILE).toBe('/proc/sys/net/core/somaxconn');
  });

  it('warns below 1,024 (kernels before 5.4 default to 128), not at 4,096 or when unknown', () => {
    expect(backlogWarning(128)).toBe(LOW_WARNING);
    expect(backlogWarning(1023)).toContain('net.core.somaxconn is 1023');
    expect(backlogWarning(1024)).toBeNull();
    expect(backlogWarning(4096)).toBeNull();
    expect(backlogWarning(null)).toBeNull();
  });
});

describe('a gateway starting under a low cap', () => {
  let gateway: RunningGateway | null = null;
  afterEach(async () => {
    await gateway?.close({ flushTimeoutMs: 1_000 });
    gateway = null;
  });

  const start = async (somaxconnFile: string): Promise<Record<string, unknown>[]> => {
    const lines: Record<string, unknown>[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split('\n')) if (line) lines.push(JSON.parse(line));
        done();
      },
    });
    const config = configSchema.parse({
      server: { host: '127.0.0.1', port: 0 },
      fleet: { replicaId: `backlog-${process.pid}` },
    });
    gateway = await startGateway(config, pino({ level: 'warn' }, sink), { listen: { somaxconnFile } });
    return lines;
  };

  it('says so once, with the cap and what it asked for, and serves anyway', async () => {
    const lines = await start(capFile('low', '128\n'));
    const warned = lines.filter((l) => l.msg === LOW_WARNING);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 40, somaxconn: 128, requested: LISTEN_BACKLOG });
    expect((await fetch(`${gateway!.url}/healthz`)).status).toBe(200);
  });

  it('says nothing of it at 4,096', async () => {
    const lines = await start(capFile('ok', '4096\n'));
    expect(lines.filter((l) => String(l.msg).includes('somaxconn'))).toEqual([]);
  });
});
