/**
 * One simulated capsule behind a test gateway, and the small readers the AI SDK surface's tests
 * share: the raw `data:` lines of a UI message stream, and a chat's history.
 */
import type { UIMessage } from 'ai';
import {
  startSimulator,
  type SimulatedCapsule,
  type SimulatorOptions,
} from '../../../src/simulator/index.js';
import { startTestGateway, type TestGateway, type TestGatewayOptions } from '../../support/gateway.js';
import { uniqueCapsule } from '../../support/redis.js';

export interface ChatRig {
  sim: SimulatedCapsule;
  gw: TestGateway;
  capsule: string;
  /** `{gateway}/ai-sdk/{capsule}/chat` */
  api: string;
  close(): Promise<void>;
}

export const startChatRig = async (
  options: {
    sim?: SimulatorOptions;
    redisUrl?: string | undefined;
    config?: TestGatewayOptions['config'];
    extra?: TestGatewayOptions['extra'];
  } = {},
): Promise<ChatRig> => {
  const sim = await startSimulator({ taskAcceptance: 'single', ...options.sim });
  const capsule = uniqueCapsule('chat');
  const gw = await startTestGateway({
    capsules: { [capsule]: sim.url },
    ...(options.redisUrl ? { redisUrl: options.redisUrl } : {}),
    ...(options.config ? { config: options.config } : {}),
    ...(options.extra ? { extra: options.extra } : {}),
    // A fresh gateway holds its first hand-off while the capsule's replay may still show an older
    // one (3 s by default): nothing ran before here.
    tuning: { queue: { orphanGraceMs: 100 } },
  });
  return {
    sim,
    gw,
    capsule,
    api: `${gw.baseUrl}/ai-sdk/${capsule}/chat`,
    close: async () => {
      await gw.close();
      await sim.stop();
    },
  };
};

/** Every `data:` payload of an SSE body, in order, until the body closes. */
export const dataLines = async (response: Response): Promise<string[]> => {
  const text = await response.text();
  return text
    .split('\n\n')
    .map((event) => event.split('\n').find((line) => line.startsWith('data: ')))
    .filter((line): line is string => line !== undefined)
    .map((line) => line.slice('data: '.length));
};

/** The chunks of a UI message stream body (the final `[DONE]` checked and left out). */
export const chunksOf = async (response: Response): Promise<Record<string, unknown>[]> => {
  const lines = await dataLines(response);
  if (lines.at(-1) !== '[DONE]') throw new Error(`the stream did not end with [DONE]: ${lines.at(-1)}`);
  return lines.slice(0, -1).map((l) => JSON.parse(l) as Record<string, unknown>);
};

export const history = async (
  api: string,
  chatId: string,
  headers: Record<string, string> = {},
): Promise<UIMessage[]> => {
  const res = await fetch(`${api}/${encodeURIComponent(chatId)}/messages`, { headers });
  if (res.status !== 200) throw new Error(`messages: ${res.status} ${await res.text()}`);
  return (await res.json()) as UIMessage[];
};

/** A user message as the client builds it. */
export const userMessage = (id: string, text: string): UIMessage => ({
  id,
  role: 'user',
  parts: [{ type: 'text', text }],
});

/** What the client's state holds, as JSON (undefined fields dropped) to compare with an answer. */
export const plain = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

/** Poll `check` every 20 ms until it holds, at most `ms` (a bounded wait on a client's or the gateway's state). */
export const until = async (check: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> => {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
};
