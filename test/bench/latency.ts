/**
 * `npm run bench -- latency`: what a chat user feels first. Messages are spaced like a user's (the
 * next one 1–2 s after the last reply; `--quick`: 100–200 ms and fewer of them), each to an idle
 * capsule, and per surface the bench times:
 * - hand-off: the surface's 202 → the capsule has the task (the simulator's `run`, in this process);
 * - time to first token (TTFT): the request sent → the reply's first text chunk at a client reading
 *   the surface live (Flue updates SSE and a BeeOS conversation's events, open before the message;
 *   a BeeOS task's events, opened on its 202, as a client of that route must).
 * Beside them, in the same run: the same message sent straight to the capsule (`message/stream` to
 * the simulator) and the native `message/stream` through the gateway. Three set-ups: one replica on
 * the embedded store, one on Redis, and two on Redis with every message admitted (and read) on the
 * replica that does not own the capsule, whose owner is woken through Redis.
 * Everything runs in this process (gateways, simulator, clients): compare within the run.
 * Env: BENCH_LATENCY_MESSAGES (per surface and set-up; 20, quick 10), BENCH_LATENCY_GAP_MS (the
 * shortest gap; 1000, quick 100: each gap is this plus up to as much again at random).
 */
import { randomUUID } from 'node:crypto';
import { hashApiKey } from '../support/api-keys.js';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { startTestGateway, type TestGateway } from '../support/gateway.js';
import { startCrossReplica } from '../fleet/cross-replica-rig.js';
import { num } from './bench-env.js';
import type { Figure } from './scale-summary.js';

const KEY = `oag_${'e5'.repeat(32)}`;
const AUTH = { authorization: `Bearer ${KEY}` };
const JSON_AUTH = { ...AUTH, 'content-type': 'application/json' };
/** The reply's first text chunk (the simulator's default script answers `Echo: <text>`). */
const FIRST_TOKEN = 'Echo:';
/** Submit on every surface, read them, and `control` for the native `message/stream`. */
const BENCH_KEYS = [
  {
    sha256: hashApiKey(KEY),
    owner: 'bench',
    scopes: ['submit' as const, 'observe' as const, 'control' as const],
  },
];

type Surface = 'direct' | 'native' | 'beeos-task' | 'beeos-conversation' | 'flue';
const SURFACES: Surface[] = ['direct', 'native', 'beeos-task', 'beeos-conversation', 'flue'];
const QUEUED: Surface[] = ['beeos-task', 'beeos-conversation', 'flue'];

interface Setup {
  name: string;
  sim: SimulatedCapsule;
  /** Where messages are sent and read (the non-owner across replicas). */
  gw: TestGateway;
  capsule: string;
  close(): Promise<void>;
}

/** A response body read as it arrives: who waits for a string learns when its chunk came. */
class LiveText {
  private text = '';
  private readonly waiters = new Set<() => void>();
  private ended = false;
  private readonly reader: ReadableStreamDefaultReader<Uint8Array>;

  constructor(res: Response) {
    if (!res.ok || !res.body) throw new Error(`stream refused: HTTP ${res.status}`);
    this.reader = res.body.getReader();
    void this.pump();
  }

  private async pump(): Promise<void> {
    const decoder = new TextDecoder();
    try {
      for (;;) {
        const { done, value } = await this.reader.read();
        if (done) break;
        this.text += decoder.decode(value, { stream: true });
        for (const w of [...this.waiters]) w();
      }
    } catch {
      // cancelled
    }
    this.ended = true;
    for (const w of [...this.waiters]) w();
  }

  get length(): number {
    return this.text.length;
  }

  /** performance.now() when `needle` arrived after `from` (characters read so far), within `ms`. */
  waitFor(needle: string, from: number, ms = 30_000): Promise<number> {
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (this.text.indexOf(needle, from) >= 0) {
          done();
          resolve(performance.now());
        } else if (this.ended) {
          done();
          reject(new Error(`stream ended before ${JSON.stringify(needle)}`));
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no ${JSON.stringify(needle)} within ${ms} ms`));
      }, ms);
      const done = (): void => {
        clearTimeout(timer);
        this.waiters.delete(check);
      };
      this.waiters.add(check);
      check();
    });
  }

  close(): void {
    void this.reader.cancel().catch(() => undefined);
  }
}

const rpcBody = (text: string, contextId: string): string =>
  JSON.stringify({
    jsonrpc: '2.0',
    id: randomUUID(),
    method: 'message/stream',
    params: { message: { messageId: randomUUID(), role: 'user', parts: [{ text }], contextId } },
  });

interface Sample {
  handoffMs: number | null;
  ttftMs: number;
}

/** When the simulator next takes a task (performance.now()). */
const nextRun = (sim: SimulatedCapsule): Promise<number> =>
  new Promise((resolve) => sim.once('run', () => resolve(performance.now())));

/** One message per surface; the live readers stay open across messages. */
class Client {
  private flue: LiveText | null = null;
  private beeosConversation: { id: string; live: LiveText } | null = null;
  private readonly flueConversation = `lat-${randomUUID()}`;

  constructor(private readonly setup: Setup) {}

  private get base(): string {
    return this.setup.gw.baseUrl;
  }

  private get api(): string {
    return `${this.base}/api/v1/agents/${this.setup.capsule}`;
  }

  async open(): Promise<void> {
    // Flue: the conversation exists once its first message is admitted; the warm-up message does it.
    await this.send('flue', 'warm-up');
    const conv = (await (
      await fetch(`${this.api}/conversations`, { method: 'POST', headers: JSON_AUTH, body: '{}' })
    ).json()) as { data: { conversation_id: string } };
    const id = conv.data.conversation_id;
    this.beeosConversation = {
      id,
      live: new LiveText(await fetch(`${this.api}/conversations/${id}/events`, { headers: AUTH })),
    };
  }

  /**
   * Send `text` (one word: the reply's chunks split at word starts, and ` <text>` is its last one)
   * on `surface`; resolves once the reply's first token was read (and the task ended).
   */
  async send(surface: Surface, text: string): Promise<Sample> {
    const { sim } = this.setup;
    const ran = nextRun(sim);
    let handoffMs: number | null = null;
    let ttftMs: number;
    const t0 = performance.now();
    switch (surface) {
      case 'direct':
      case 'native': {
        const url = surface === 'direct' ? sim.url : `${this.base}/murmur/${this.setup.capsule}/`;
        const res = await fetch(url, {
          method: 'POST',
          headers: surface === 'direct' ? { 'content-type': 'application/json' } : JSON_AUTH,
          body: rpcBody(text, `lat-${surface}`),
        });
        const live = new LiveText(res);
        ttftMs = (await live.waitFor(FIRST_TOKEN, 0)) - t0;
        live.close();
        break;
      }
      case 'beeos-task': {
        const res = await fetch(`${this.api}/tasks`, {
          method: 'POST',
          headers: JSON_AUTH,
          body: JSON.stringify({ message: text }),
        });
        const admitted = performance.now();
        if (res.status !== 202) throw new Error(`BeeOS task: HTTP ${res.status}`);
        const task = ((await res.json()) as { data: { task_id: string } }).data.task_id;
        const live = new LiveText(await fetch(`${this.api}/tasks/${task}/events`, { headers: AUTH }));
        ttftMs = (await live.waitFor(FIRST_TOKEN, 0)) - t0;
        handoffMs = (await ran) - admitted;
        live.close();
        break;
      }
      case 'beeos-conversation': {
        const conv = this.beeosConversation!;
        const from = conv.live.length;
        const first = conv.live.waitFor(FIRST_TOKEN, from);
        const res = await fetch(`${this.api}/conversations/${conv.id}/messages`, {
          method: 'POST',
          headers: JSON_AUTH,
          body: JSON.stringify({ message: text }),
        });
        const admitted = performance.now();
        if (res.status !== 202) throw new Error(`BeeOS conversation: HTTP ${res.status}`);
        ttftMs = (await first) - t0;
        handoffMs = (await ran) - admitted;
        // The whole reply read: the next message's first token cannot be this one's.
        await conv.live.waitFor(` ${text}`, from);
        break;
      }
      case 'flue': {
        const url = `${this.base}/flue/${this.setup.capsule}/${this.flueConversation}`;
        const from = this.flue?.length ?? 0;
        const first = this.flue?.waitFor(FIRST_TOKEN, from);
        const res = await fetch(url, {
          method: 'POST',
          headers: JSON_AUTH,
          body: JSON.stringify({ kind: 'user', body: text }),
        });
        const admitted = performance.now();
        if (res.status !== 202) throw new Error(`Flue: HTTP ${res.status}`);
        if (!this.flue) {
          // The warm-up: the conversation exists now; read it live from its start.
          this.flue = new LiveText(await fetch(`${url}?view=updates&offset=-1&live=sse`, { headers: AUTH }));
          ttftMs = (await this.flue.waitFor(FIRST_TOKEN, 0)) - t0;
        } else ttftMs = (await first!) - t0;
        handoffMs = (await ran) - admitted;
        await this.flue.waitFor(` ${text}`, from);
        break;
      }
    }
    await sim.idle();
    return { handoffMs, ttftMs };
  }

  close(): void {
    this.flue?.close();
    this.beeosConversation?.live.close();
  }
}

const pct = (values: number[], p: number): number => {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};
const ms = (v: number): string => (Number.isFinite(v) ? v.toFixed(1) : '–');

interface SetupResult {
  name: string;
  samples: Record<Surface, Sample[]>;
}

const measure = async (setup: Setup, messages: number, gapMs: number): Promise<SetupResult> => {
  const client = new Client(setup);
  const samples = Object.fromEntries(SURFACES.map((s) => [s, [] as Sample[]])) as Record<Surface, Sample[]>;
  try {
    await client.open();
    // Warm-up: one message per surface, not counted (connections, JIT).
    for (const s of SURFACES) await client.send(s, `warm-${s}`);
    for (let i = 0; i < messages; i++) {
      // Interleaved: every surface sees the same moments of the machine's load.
      for (const s of SURFACES) {
        await new Promise((r) => setTimeout(r, gapMs + Math.random() * gapMs));
        samples[s].push(await client.send(s, `m${i}-${s}`));
      }
    }
  } finally {
    client.close();
  }
  return { name: setup.name, samples };
};

const oneReplica = async (redisUrl?: string): Promise<Setup> => {
  const sim = await startSimulator({ heartbeatMs: 1000 });
  const gw = await startTestGateway({
    capsules: { cap: sim.url },
    ...(redisUrl ? { redisUrl } : {}),
    config: { apiKeys: BENCH_KEYS },
  });
  return {
    name: redisUrl ? 'one replica, Redis' : 'one replica, embedded',
    sim,
    gw,
    capsule: 'cap',
    close: async () => {
      await gw.close();
      await sim.stop();
    },
  };
};

const twoReplicas = async (redisUrl: string): Promise<Setup> => {
  const rig = await startCrossReplica(redisUrl, {
    sim: { heartbeatMs: 1000 },
    config: { apiKeys: BENCH_KEYS },
  });
  return {
    name: 'two replicas, Redis (admitted by the non-owner)',
    sim: rig.sim,
    gw: rig.other,
    capsule: rig.capsule,
    close: rig.close,
  };
};

export const benchLatency = async (options: { redisUrl?: string; quick: boolean }): Promise<Figure[]> => {
  const messages = num('BENCH_LATENCY_MESSAGES', options.quick ? 10 : 20);
  const gapMs = num('BENCH_LATENCY_GAP_MS', options.quick ? 100 : 1000);
  console.log(
    `\n# latency: ${messages} messages per surface and set-up, ${gapMs}–${2 * gapMs} ms apart, each to an idle capsule`,
  );
  const makers: (() => Promise<Setup>)[] = [() => oneReplica()];
  if (options.redisUrl) {
    const url = options.redisUrl;
    makers.push(
      () => oneReplica(url),
      () => twoReplicas(url),
    );
  } else console.warn('latency: no redis-server, only the embedded store is measured');
  const figures: Figure[] = [];
  for (const make of makers) {
    const setup = await make();
    let result: SetupResult;
    try {
      result = await measure(setup, messages, gapMs);
    } finally {
      await setup.close();
    }
    const rows = SURFACES.map((s) => {
      const xs = result.samples[s];
      const h = xs.flatMap((x) => (x.handoffMs === null ? [] : [x.handoffMs]));
      const t = xs.map((x) => x.ttftMs);
      return {
        surface: s,
        'hand-off p50': ms(pct(h, 50)),
        'hand-off p95': ms(pct(h, 95)),
        'hand-off p99': ms(pct(h, 99)),
        'TTFT p50': ms(pct(t, 50)),
        'TTFT p95': ms(pct(t, 95)),
        'TTFT p99': ms(pct(t, 99)),
      };
    });
    console.log(`\n## ${result.name} (ms)`);
    console.table(rows);
    const handoffP95 = Object.fromEntries(
      QUEUED.map((s) => [
        s,
        pct(
          result.samples[s].map((x) => x.handoffMs!),
          95,
        ),
      ]),
    );
    const ttftP95 = (s: Surface) =>
      pct(
        result.samples[s].map((x) => x.ttftMs),
        95,
      );
    const direct = ttftP95('direct');
    const across = result.name.startsWith('two');
    const handoffTarget = across ? 50 : 25;
    const worstHandoff = Math.max(...Object.values(handoffP95));
    figures.push({
      figure: `hand-off p95, admission → the capsule has the task (${result.name})`,
      target: `≤ ${handoffTarget} ms`,
      measured: QUEUED.map((s) => `${s} ${ms(handoffP95[s]!)}`).join(', ') + ' ms',
      met: worstHandoff <= handoffTarget,
    });
    const above = QUEUED.map((s) => [s, ttftP95(s) - direct] as const);
    figures.push({
      figure: `time to first token p95 above direct (${result.name})`,
      target: '≤ 25 ms',
      anchor: `direct ${ms(direct)} ms, native ${ms(ttftP95('native'))} ms`,
      measured: above.map(([s, d]) => `${s} +${ms(d)}`).join(', ') + ' ms',
      met: Math.max(...above.map(([, d]) => d)) <= 25,
    });
  }
  return figures;
};
