/**
 * The auth model's pieces on real gateways: JWTs (HS256 and ES256 with a key made here), tickets
 * issued by one replica and accepted by another sharing Redis (the signing key is SET NX there),
 * and secure by default (the CLI refuses a network address without auth, exit 2; `auth.open` serves
 * with a warning and says so on /readyz).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportSPKI, generateKeyPair, SignJWT } from 'jose';
import { afterEach, describe, expect, it } from 'vitest';
import { sha256Hex } from '../../src/auth/admin-token.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { testRedisUrl, uniqueCapsule } from '../support/redis.js';
import { freePort } from '../support/redis-server.js';

const ISSUER = 'https://id.test';
const AUDIENCE = 'murmur-gateway';

let sim: SimulatedCapsule | null = null;
const gateways: TestGateway[] = [];
afterEach(async () => {
  for (const g of gateways.splice(0)) await g.close();
  await sim?.stop();
  sim = null;
});

const start = async (extra: Parameters<typeof startTestGateway>[0]['extra'], redisUrl?: string) => {
  sim ??= await startSimulator({ heartbeatMs: 1_000 });
  const capsule = uniqueCapsule('auth');
  const gw = await startTestGateway({
    capsules: { [capsule]: sim.url },
    extra,
    ...(redisUrl ? { redisUrl } : {}),
  });
  gateways.push(gw);
  return { gw, capsule };
};

const now = () => Math.floor(Date.now() / 1000);

describe('JWT', () => {
  it('HS256: sub → owner, scope → scopes; issuer, audience, exp and nbf are enforced', async () => {
    const secret = 'a-shared-hs256-secret-of-the-test';
    const { gw } = await start({ auth: { jwt: { issuer: ISSUER, audience: AUDIENCE, secret } } });
    const key = new TextEncoder().encode(secret);
    const sign = (claims: { iss?: string; aud?: string; exp?: number; nbf?: number; scope?: string }) =>
      new SignJWT({ ...(claims.scope !== undefined ? { scope: claims.scope } : { scope: 'ops' }) })
        .setProtectedHeader({ alg: 'HS256' })
        .setSubject('carol')
        .setIssuer(claims.iss ?? ISSUER)
        .setAudience(claims.aud ?? AUDIENCE)
        .setExpirationTime(claims.exp ?? now() + 60)
        .setNotBefore(claims.nbf ?? now() - 5)
        .sign(key);
    const get = async (jwt: string) =>
      (await fetch(`${gw.baseUrl}/capsules`, { headers: { authorization: `Bearer ${jwt}` } })).status;
    expect(await get(await sign({}))).toBe(200);
    expect(await get(await sign({ scope: 'submit' }))).toBe(403);
    expect(await get(await sign({ iss: 'https://other.test' }))).toBe(401);
    expect(await get(await sign({ aud: 'someone-else' }))).toBe(401);
    expect(await get(await sign({ exp: now() - 30 }))).toBe(401);
    expect(await get(await sign({ nbf: now() + 600 }))).toBe(401);
    // Same claims, another key: refused.
    const forged = await new SignJWT({ scope: 'ops' })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('carol')
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime(now() + 60)
      .sign(new TextEncoder().encode('not-the-configured-secret-at-all'));
    expect(await get(forged)).toBe(401);
  });

  it('ES256 with a PEM public key; an HS256 token is refused (no algorithm confusion)', async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256');
    const { gw, capsule } = await start({
      auth: { jwt: { issuer: ISSUER, audience: AUDIENCE, publicKey: await exportSPKI(publicKey) } },
    });
    const jwt = await new SignJWT({ scope: 'submit', capsules: [capsule] })
      .setProtectedHeader({ alg: 'ES256' })
      .setSubject('dave')
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime(now() + 60)
      .sign(privateKey);
    const send = await fetch(`${gw.baseUrl}/api/v1/agents/${capsule}/tasks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${jwt}`, 'content-type': 'application/json' },
      body: JSON.stringify({ message: 'from a JWT' }),
    });
    expect(send.status).toBe(202);
    const hs = await new SignJWT({ scope: 'submit' })
      .setProtectedHeader({ alg: 'HS256' })
      .setSubject('dave')
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime(now() + 60)
      .sign(new TextEncoder().encode('x'.repeat(32)));
    const refused = await fetch(`${gw.baseUrl}/api/v1/agents/${capsule}/tasks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${hs}`, 'content-type': 'application/json' },
      body: JSON.stringify({ message: 'forged' }),
    });
    expect(refused.status).toBe(401);
  });
});

describe('tickets', () => {
  it('a ticket issued by one replica is accepted by another sharing Redis; never on POST', async () => {
    const redisUrl = testRedisUrl();
    expect(redisUrl).toBeDefined();
    const observer = `observer-key-${Date.now()}`;
    const extra = {
      auth: { apiKeys: [{ sha256: sha256Hex(observer), owner: 'ops-team', scopes: ['observe' as const] }] },
    };
    sim = await startSimulator({ heartbeatMs: 1_000 });
    const capsule = uniqueCapsule('tix');
    const a = await startTestGateway({ capsules: { [capsule]: sim.url }, redisUrl, extra });
    gateways.push(a);
    const b = await startTestGateway({ capsules: { [capsule]: sim.url }, redisUrl, extra });
    gateways.push(b);
    const issued = await fetch(`${a.baseUrl}/auth/tickets`, {
      method: 'POST',
      headers: { authorization: `Bearer ${observer}` },
    });
    expect(issued.status).toBe(200);
    expect(issued.headers.get('cache-control')).toBe('no-store');
    const { ticket, expires_at } = (await issued.json()) as { ticket: string; expires_at: string };
    expect(Date.parse(expires_at)).toBeGreaterThan(Date.now());
    const poll = await fetch(
      `${b.baseUrl}/murmur/${capsule}/poll?after=0&wait=0&ticket=${encodeURIComponent(ticket)}`,
    );
    expect(poll.status).toBe(200);
    // A ticket is not a Bearer credential and is not read on non-stream routes.
    const rpc = await fetch(`${b.baseUrl}/murmur/${capsule}/?ticket=${encodeURIComponent(ticket)}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'stream/watch' }),
    });
    expect(rpc.status).toBe(401);
    // A changed signature character, and the same signature spelt with other spare bits in its
    // last character (base64url decoding ignores them): both refused.
    const mac = ticket.slice(ticket.lastIndexOf('.') + 1);
    const head = ticket.slice(0, ticket.lastIndexOf('.') + 1);
    const flip = (c: string): string => (c === 'A' ? 'B' : 'A');
    const tampered = head + flip(mac[0]!) + mac.slice(1);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
    const last = alphabet.indexOf(mac.at(-1)!);
    const respelt = head + mac.slice(0, -1) + alphabet[last ^ 1];
    for (const forged of [tampered, respelt]) {
      const bad = await fetch(`${b.baseUrl}/murmur/${capsule}/poll?after=0&wait=0&ticket=${forged}`);
      expect(bad.status).toBe(401);
    }
    // No ticket without a Bearer credential.
    expect((await fetch(`${a.baseUrl}/auth/tickets`, { method: 'POST' })).status).toBe(401);
  });
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

const CLI = ['--import', 'tsx', 'src/cli.ts'];

describe('secure by default', () => {
  it('refuses a network address without auth: one message, exit 2', async () => {
    const run = await new Promise<Run>((resolve) => {
      const child = spawn(process.execPath, [...CLI, '--host', '0.0.0.0', '--port', '0'], { stdio: 'pipe' });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('exit', (code) => resolve({ code, stdout, stderr }));
    });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(
      /^murmur-gateway: refusing to serve on 0\.0\.0\.0 without authentication: .*apiKeys.*jwt.*auth: \{open: true\}/,
    );
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
  });

  it('auth.open serves on a network address with a warning, and /readyz says so', async () => {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'mg-auth-'));
    const file = join(dir, 'open.yaml');
    writeFileSync(file, `server:\n  host: 0.0.0.0\n  port: ${port}\nauth:\n  open: true\n`);
    const child = spawn(process.execPath, [...CLI, '--config', file], { stdio: 'pipe' });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    let out = '';
    await new Promise<void>((resolve, reject) => {
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        // The log lines and the banner reach the pipe in either order: wait for both.
        if (out.includes('listening on') && out.includes('auth.open')) resolve();
      });
      child.once('exit', () => reject(new Error(`exited early: ${out}`)));
    });
    const ready = (await (await fetch(`http://127.0.0.1:${port}/readyz`)).json()) as { auth?: string };
    expect(ready.auth).toBe('open');
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});

describe('redaction', () => {
  it('ticket= is redacted from a logged URL, wherever it is in the query', async () => {
    const { redactTicket } = await import('../../src/http/auth-routes.js');
    expect(redactTicket('http://h/murmur/a/events?ticket=t1.abc.def&after=3')).toBe(
      'http://h/murmur/a/events?ticket=[redacted]&after=3',
    );
    expect(redactTicket('/flue/a/c?live=sse&TICKET=x.y.z')).toBe('/flue/a/c?live=sse&TICKET=[redacted]');
  });
});
