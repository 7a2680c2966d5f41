/**
 * The README's five-minute tour, run as written: every bash block of that section, against the
 * demo's simulated capsules behind a gateway on a free loopback port (the blocks' `localhost:8080`
 * rewritten to it), started as `--demo` starts them. Each block must exit 0 (a `--max-time` stream
 * may end by its timer, curl's 28) and answer what the README says it shows, so a change of route or
 * answer fails here before it rots there; every link the tour names must answer too.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoGateway, type DemoGateway } from '../support/demo-gateway.js';
import type { TestGateway } from '../support/gateway.js';
import { sseIds, sseTextUntil } from '../support/sse-text.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

/** The bash blocks of one `## ` section, in order. */
const blocksOf = (heading: string): string[] => {
  const start = readme.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`README has no "## ${heading}" section`);
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  return [...section.matchAll(/```bash\n([\s\S]*?)```/g)].map((m) => m[1]!);
};

/** What each tour block must show, in README order. */
const EXPECT: [string, (out: string) => void | Promise<void>][] = [
  ['the fleet', (out) => expect(JSON.parse(out).capsules.map((c: { id: string }) => c.id)).toEqual(DEMO_IDS)],
  [
    'the native stream',
    (out) => {
      expect(out).toMatch(/^event: connection-ack\n/);
      // A fresh demo's log begins complete: no `gap` (the demo's gateway watched before any work).
      expect(out).not.toMatch(/^event: gap$/m);
      expect(out).toMatch(/^id: \d+$/m);
    },
  ],
  [
    'the native stream resumed',
    async (out) => {
      // The stream goes on right after the id given: its first id is the one a fresh read shows next.
      const after = Number(/^resuming after (\d+)$/m.exec(out)?.[1]);
      const fresh = await firstIds(2);
      expect(after).toBe(fresh[0]);
      const ids = sseIds(out);
      expect(ids[0]).toBe(fresh[1]);
      expect(ids).toEqual([...ids].sort((a, b) => a - b));
    },
  ],
  ['the JSON pages', (out) => expect(JSON.parse(out).records.length).toBeGreaterThan(0)],
  [
    'the Durable Stream',
    (out) => {
      // The first read's headers, then the resumed long-poll's, which goes on from that offset.
      const offsets = [...out.matchAll(/^stream-next-offset: (\d{16}_\d{16})\r?$/gim)].map((m) => m[1]!);
      expect(offsets).toHaveLength(2);
      expect(out).toMatch(/^HTTP\/1\.1 200 /m);
      expect(out.match(/^HTTP\/1\.1 (200|204) /gm)).toHaveLength(2);
      expect(offsets[1]! >= offsets[0]!).toBe(true);
    },
  ],
  [
    'a Flue conversation',
    (out) => {
      // curl prints each body as it came, with no newline between the two answers.
      const at = out.indexOf('}{') + 1;
      const [admitted, history] = [out.slice(0, at), out.slice(at)].map((l) => JSON.parse(l));
      expect(admitted.submissionId).toMatch(/^sub_/);
      expect(history.conversationId).toBe('tour');
      expect(history.messages[0].parts[0].text).toBe('hello');
    },
  ],
  [
    'a Flue conversation followed',
    (out) => {
      // From -1 the updates begin with the whole conversation, then a control event with the offset.
      expect(out).toMatch(/^event: data\ndata:.*"type":"conversation-reset"/m);
      expect(out).toMatch(/"text":"hello"/);
      expect(out).toMatch(/^event: control\ndata:\{"streamNextOffset":"\d{16}_\d{16}"/m);
    },
  ],
  [
    'an A2A agent',
    (out) => {
      // The card names the gateway's JSON-RPC interface; the stream starts with the Task snapshot.
      expect(out).toMatch(/"protocolBinding":"JSONRPC","protocolVersion":"1\.0"/);
      expect(out).toMatch(
        /id: \d+\ndata: \{"jsonrpc":"2\.0","id":1,"result":\{"task":\{"id":"[^"]+","contextId":"ctx-/m,
      );
    },
  ],
  [
    'an A2A webhook refused',
    (out) =>
      // The demo admits no loopback receiver: the config is refused before anything is queued.
      expect(JSON.parse(out)).toEqual({
        jsonrpc: '2.0',
        id: 2,
        error: {
          code: -32602,
          message:
            'configuration.taskPushNotificationConfig.url is a loopback address (a2a.pushNotifications.webhooks.allowLoopback is off)',
        },
      }),
  ],
  [
    'a BeeOS task',
    (out) => {
      const body = JSON.parse(out);
      expect(body.success).toBe(true);
      expect(Array.isArray(body.data.messages ?? body.data)).toBe(true);
    },
  ],
  [
    'an AI SDK chat',
    (out) => {
      expect(out).toMatch(/^data: \{"type":"start","messageId":"msg-[^"]+"\}\n\n/);
      expect(out).toContain('data: {"type":"finish","finishReason":"stop"}\n\n');
      expect(out.endsWith('data: [DONE]\n\n')).toBe(true);
      const deltas = [...out.matchAll(/"type":"text-delta","id":"[^"]+","delta":("[^"]*")/g)];
      expect(deltas.map((m) => JSON.parse(m[1]!) as string).join('')).toBe('Echo: hello');
    },
  ],
  [
    'the chat on BeeOS',
    (out) => {
      // The tour's Flue conversation and its chat are one context: both messages, both replies.
      const { data } = JSON.parse(out) as {
        data: { messages: { type: string; state: string; body?: string; payload?: { text?: string } }[] };
      };
      const users = data.messages.filter((m) => m.type === 'chat_message').map((m) => m.payload?.text);
      expect(users).toEqual(['hello', 'hello']);
      const replies = data.messages.filter((m) => m.type === 'agent_reply' && m.state === 'completed');
      expect(replies.map((m) => m.body)).toEqual(['Echo: hello', 'Echo: hello']);
    },
  ],
];

const DEMO_IDS = ['demo-alpha', 'demo-beta', 'demo-v04', 'demo-v05', 'demo-v06', 'demo-v10'];

/** The first `n` ids of demo-alpha's native stream, read from its start. */
const firstIds = async (n: number): Promise<number[]> =>
  sseIds(await sseTextUntil(`${gw.baseUrl}/murmur/demo-alpha/events`, (t) => sseIds(t).length >= n)).slice(
    0,
    n,
  );

let running: DemoGateway;
let gw: TestGateway;

beforeAll(async () => {
  running = await startDemoGateway();
  gw = running.gw;
}, 60_000);
afterAll(() => running?.close());

const run = (script: string): Promise<{ code: number; out: string; err: string }> =>
  new Promise((resolve) => {
    execFile('bash', ['-c', script], { timeout: 20_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, out: stdout, err: stderr });
    });
  });

describe('README tour', () => {
  const blocks = blocksOf('A five-minute tour');

  it('every localhost link of the tour and the set-up answers (the root is the dashboard)', async () => {
    const start = readme.indexOf('\n## Set up\n');
    const end = readme.indexOf('\n## Busy capsules\n');
    const links = [...readme.slice(start, end).matchAll(/<(http:\/\/localhost:8080[^>]*)>/g)].map(
      (m) => m[1]!,
    );
    expect(links).toEqual([
      'http://localhost:8080',
      'http://localhost:8080/dashboard/',
      'http://localhost:8080/dashboard/chat.html',
    ]);
    for (const link of links) {
      const res = await fetch(link.replace('http://localhost:8080', gw.baseUrl));
      expect(res.status, link).toBe(200);
      expect(res.headers.get('content-type'), link).toBe('text/html; charset=utf-8');
      expect(await res.text(), link).toContain('<title>');
    }
  });

  it('has the blocks this test knows', () => {
    expect(blocks.length).toBe(EXPECT.length);
  });

  EXPECT.forEach(([what, check], i) => {
    it(`${what}: runs as written and answers as the README says`, async () => {
      const script = blocks[i]!.replaceAll('localhost:8080', gw.baseUrl.replace(/^http:\/\//, ''));
      const { code, out, err } = await run(script);
      const timedStream = code === 28 && script.includes('--max-time');
      expect(code === 0 || timedStream, `${what}: exit ${code}: ${err}`).toBe(true);
      await check(out);
    });
  });
});
