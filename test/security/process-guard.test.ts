/**
 * The last line of defence: whatever a handler did not expect is a 500 for that request, a log line
 * and a count in `murmur_gateway_unexpected_errors_total`; a rejection or exception nothing handled
 * is logged and counted by the process guard, and the process goes on serving (Node's default would
 * end it, and every reader of the replica with it).
 */
import { spawn } from 'node:child_process';
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { createHttpApp } from '../../src/http/app.js';
import { createLogger } from '../../src/logger.js';
import { gatewayForFile } from '../support/gateway-for-file.js';

const counted = (text: string, where: string): number => {
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`murmur_gateway_unexpected_errors_total{where="${where}"}`));
  return Number(line?.split(' ')[1] ?? NaN);
};

describe('unexpected failures', () => {
  const rig = gatewayForFile({ simulator: { heartbeatMs: 200 } });

  it('a handler that throws: 500 in the ops grammar, counted, and the next request is served', async () => {
    const boom = new Hono().get('/boom', () => {
      throw new TypeError('not meant to happen');
    });
    const ok = new Hono().get('/fine', (c) => c.text('fine'));
    const { app, metrics } = createHttpApp({
      core: rig.gw.core,
      logger: createLogger('silent'),
      corsOrigins: [],
      storeReady: () => Promise.resolve(true),
      surfaces: [
        { name: 'boom', prefix: '/boom', routes: boom },
        { name: 'fine', prefix: '/fine', routes: ok },
      ],
    });
    const before = counted(await metrics.render(), 'request');
    const res = await app.request('/boom');
    expect(res.status).toBe(500);
    expect(await res.json()).toEqual({ error: { code: 'internal', message: 'internal error' } });
    expect(counted(await metrics.render(), 'request')).toBe(before + 1);
    expect(await (await app.request('/fine')).text()).toBe('fine');
  });

  it('the process guard: an unhandled rejection and an uncaught exception are logged, counted, survived', async () => {
    // A child process of its own: the guard changes process-wide handlers.
    const script = `
      import { installProcessGuard, unexpectedErrorCounts } from './src/http/unexpected-errors.ts';
      import { createLogger } from './src/logger.ts';
      installProcessGuard(createLogger('error'));
      void Promise.reject(new Error('nobody handles this'));
      setTimeout(() => { throw new Error('nor this'); }, 10);
      setTimeout(() => { process.stdout.write('COUNTS ' + JSON.stringify(unexpectedErrorCounts()) + '\\n'); }, 100);
    `;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      stdio: 'pipe',
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(0);
    expect(out).toContain('COUNTS {"request":0,"rejection":1,"exception":1}');
    expect(out).toContain('"msg":"unhandled rejection (the process goes on)"');
    expect(out).toContain('"msg":"uncaught exception (the process goes on)"');
    expect(out).toContain('nobody handles this');
    expect(out).toContain('nor this');
  });
});
