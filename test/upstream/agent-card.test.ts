/**
 * Release-line detection from the agent card, by docs/release-lines.md's rules, and the card read
 * itself over HTTP (its failures are reasons, never a crash).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { cardLine, readAgentCard } from '../../src/upstream/agent-card.js';

const ses = 'ses_0123456789abcdef0123456789abcdef';
const iface = (protocolVersion: string) => [
  { url: 'http://x/', protocolBinding: 'JSONRPC', protocolVersion },
];
const capsuleExt = (params: Record<string, unknown>) => ({
  uri: 'https://murmur.dev/a2a/capsule/v1',
  params,
});
const streamExt = { uri: 'https://murmur.dev/a2a/ext#murmur-stream-v1', params: {} };

describe('cardLine', () => {
  it('tells each line apart', () => {
    expect(cardLine({ name: 'a', version: '0.2.1' }).line).toBe('0.2');
    expect(cardLine({ name: 'a', version: '0.3.7', session_id: ses })).toEqual({
      line: 'spec',
      sessionId: ses,
      name: 'a',
      version: '0.3.7',
    });
    expect(cardLine({ session_id: ses, serves: { 'stream/watch': true } })).toMatchObject({
      line: '0.4',
      sessionId: ses,
    });
    const v05 = {
      supportedInterfaces: iface('0.3'),
      capabilities: { extensions: [capsuleExt({ sessionId: ses })] },
    };
    expect(cardLine(v05)).toMatchObject({ line: '0.5', sessionId: ses });
    const v06 = {
      supportedInterfaces: iface('0.3'),
      capabilities: { extensions: [capsuleExt({ sessionId: ses }), streamExt] },
    };
    expect(cardLine(v06)).toMatchObject({ line: '0.6', sessionId: ses });
    expect(cardLine({ ...v06, supportedInterfaces: iface('1.0') }).line).toBe('1.0');
    expect(cardLine({ ...v06, supportedInterfaces: iface('1.0.2') }).line).toBe('1.0');
  });

  it("an authenticated door's public card has no session id; a card of no known shape is the spec's line or older", () => {
    expect(
      cardLine({ supportedInterfaces: iface('0.3'), capabilities: { extensions: [capsuleExt({})] } }),
    ).toMatchObject({ line: '0.5', sessionId: null });
    expect(cardLine({ metadata: { session_id: ses } })).toMatchObject({ line: 'spec', sessionId: ses });
    expect(cardLine('not an object').line).toBe('0.2');
    expect(cardLine(null)).toEqual({ line: '0.2', sessionId: null, name: null, version: null });
  });
});

describe('readAgentCard', () => {
  const answers: Record<string, [number, string]> = {
    '/ok/.well-known/agent-card.json': [200, JSON.stringify({ session_id: ses, serves: {} })],
    '/missing/.well-known/agent-card.json': [404, '{}'],
    '/garbled/.well-known/agent-card.json': [200, '{not json'],
  };
  const server = createServer((req, res) => {
    const [status, body] = answers[req.url ?? ''] ?? [500, ''];
    res.writeHead(status, { 'content-type': 'application/json' }).end(body);
  });
  const base = new Promise<string>((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`),
    ),
  );
  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('reads the card under the capsule URL, with or without a trailing slash', async () => {
    expect((await readAgentCard(`${await base}/ok/`)).line).toBe('0.4');
    expect((await readAgentCard(`${await base}/ok`)).line).toBe('0.4');
  });

  it('rejects with a short reason', async () => {
    await expect(readAgentCard(`${await base}/missing/`)).rejects.toThrow('agent card: HTTP 404');
    await expect(readAgentCard(`${await base}/garbled/`)).rejects.toThrow('agent card: not JSON');
    await expect(readAgentCard('http://127.0.0.1:1/')).rejects.toThrow('agent card: ECONNREFUSED');
  });
});

describe('the card a front door shows', () => {
  it("keeps an A2A-shaped card's description and skills, bounded", () => {
    const skills = Array.from({ length: 20 }, (_, i) => ({
      id: `s${i}`,
      name: i === 0 ? undefined : `Skill ${i}`,
      description: 'd'.repeat(2000),
      tags: ['a', 7, 'b'],
    }));
    const card = cardLine({
      name: 'cap',
      version: '1.2.0',
      description: 'What it does',
      skills: [...skills, { name: 'no id' }],
      supportedInterfaces: [{ url: 'http://x/', protocolBinding: 'JSONRPC', protocolVersion: '1.0' }],
    });
    expect(card.description).toBe('What it does');
    expect(card.skills).toHaveLength(16);
    expect(card.skills?.[0]).toEqual({
      id: 's0',
      name: 's0',
      description: 'd'.repeat(1024),
      tags: ['a', 'b'],
    });
    expect(cardLine({ name: 'old', session_id: 'ses_1', description: 'ignored' })).toEqual({
      line: 'spec',
      sessionId: 'ses_1',
      name: 'old',
      version: null,
    });
  });
});
