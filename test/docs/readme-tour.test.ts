/**
 * The README's five-minute tour, run as written: every bash block of that section, against the
 * demo's two simulated capsules behind a gateway on a free loopback port (the blocks' `localhost:8080`
 * rewritten to it). Each block must exit 0 (a `--max-time` stream may end by its timer, curl's 28) and
 * answer what the README says it shows, so a change of route or answer fails here before it rots there.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemo, type Demo } from '../../src/demo.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';

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
const EXPECT: [string, (out: string) => void][] = [
  ['the fleet', (out) => expect(JSON.parse(out).capsules.map((c: { id: string }) => c.id)).toEqual(DEMO_IDS)],
  ['the native stream', (out) => expect(out).toMatch(/^event: connection-ack\n/)],
  ['the JSON pages', (out) => expect(JSON.parse(out).records.length).toBeGreaterThan(0)],
  ['the Durable Stream', (out) => expect(out).toMatch(/^stream-next-offset: \d{16}_\d{16}\r?$/im)],
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
];

const DEMO_IDS = ['demo-alpha', 'demo-beta', 'demo-v04', 'demo-v05', 'demo-v06', 'demo-v10'];

let demo: Demo;
let gw: TestGateway;

beforeAll(async () => {
  demo = await startDemo();
  // The demo's capsules as they are, door tokens included.
  gw = await startTestGateway({ capsules: {}, extra: { capsules: demo.capsules } });
});
afterAll(async () => {
  await gw?.close();
  await demo?.stop();
});

const run = (script: string): Promise<{ code: number; out: string; err: string }> =>
  new Promise((resolve) => {
    execFile('bash', ['-c', script], { timeout: 20_000 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, out: stdout, err: stderr });
    });
  });

describe('README tour', () => {
  const blocks = blocksOf('A five-minute tour');

  it('has the blocks this test knows', () => {
    expect(blocks.length).toBe(EXPECT.length);
  });

  EXPECT.forEach(([what, check], i) => {
    it(`${what}: runs as written and answers as the README says`, async () => {
      const script = blocks[i]!.replaceAll('localhost:8080', gw.baseUrl.replace(/^http:\/\//, ''));
      const { code, out, err } = await run(script);
      const timedStream = code === 28 && script.includes('--max-time');
      expect(code === 0 || timedStream, `${what}: exit ${code}: ${err}`).toBe(true);
      check(out);
    });
  });
});
