/**
 * Child process of the fan-out bench (fanout.ts), pinned to the client core: publishes events
 * `1..count` at a fixed rate, each stamped with its publish time, either as POSTs to nchan's
 * publisher location or as `text` frames written by a simulated capsule that the gateway watches.
 *
 * The capsule is src/simulator, faithful to the spec, holding one task open (`#sim {"hold":true}`).
 * Its scripts pace chunks with a `setTimeout` per frame (`delayMs`), which drifts below the nominal
 * rate and cannot embed a publish time, so the frames are written here on a catch-up schedule
 * through the session's own write path (replay buffer, then every live watch connection), with ids
 * from its chunk counter, as a running task's chunks are.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { textFrame, type Frame } from '../../src/simulator/frames.js';
import type { Session } from '../../src/simulator/session.js';
import { eventData, eventText } from './fanout-event.js';
import { conversationsWorkload, type WorkloadSpec } from './fanout-workload.js';

interface Run {
  rate: number;
  count: number;
  /** Seqs at which to tell the parent (it samples CPU there): window start and end. */
  marks: number[];
}

/** The simulator's internals the driver writes through (see the header). */
interface SimInternals {
  current: Session;
  broadcast(frame: Frame, session: Session): void;
}

let publish: ((seq: number) => void) | null = null;
let capsule: SimulatedCapsule | null = null;
let inFlight = 0;
let failed = 0;

const startNchan = (url: string): void => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  publish = (seq) => {
    inFlight++;
    const body = eventData(seq, 'tsk_bench');
    const req = http.request(url, {
      method: 'POST',
      agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    req.on('response', (res) => {
      if (res.statusCode !== 201 && res.statusCode !== 202) failed++;
      res.resume();
      res.on('end', () => inFlight--);
    });
    req.on('error', () => {
      failed++;
      inFlight--;
    });
    req.end(body);
  };
};

/**
 * The capsule; `queue` acceptance when conversations are created through the gateway first (each
 * creation's task queues behind the last instead of being refused). Publishing is one held task's
 * chunks until a `workload` message switches it to many conversations (fanout-workload.ts).
 */
const startCapsule = async (acceptance?: 'queue'): Promise<string> => {
  capsule = await startSimulator({
    heartbeatMs: 15_000,
    bufferSize: 4096,
    ...(acceptance ? { taskAcceptance: acceptance } : {}),
  });
  const sim = capsule as unknown as SimInternals;
  // The held task would block a queue: with conversations, the workload writes the tasks.
  const task = acceptance ? null : capsule.submit('#sim {"hold":true}');
  publish = (seq) => {
    if (!task) throw new Error('publishing before the workload was set');
    const session = sim.current;
    const frame = textFrame(task.taskId, eventText(seq, task.taskId), false, session.chunk.next());
    session.buffer.push(frame);
    sim.broadcast(frame, session);
  };
  return capsule.url;
};

const startWorkload = (spec: WorkloadSpec): void => {
  const sim = capsule as unknown as SimInternals;
  const frames = conversationsWorkload(spec);
  publish = (seq) => {
    const session = sim.current;
    for (const frame of frames(seq)) {
      session.buffer.push(frame);
      sim.broadcast(frame, session);
    }
  };
};

/** The context ids of the tasks the capsule ran, in order of first appearance, once it is idle. */
const contexts = async (): Promise<string[]> => {
  await capsule!.idle();
  const seen = new Set<string>();
  for (const w of capsule!.written) {
    if (w.event !== 'status') continue;
    const ctx = (JSON.parse(w.data) as { context_id?: string }).context_id;
    if (ctx) seen.add(ctx);
  }
  return [...seen];
};

const waitWatched = (timeoutMs: number): Promise<void> =>
  new Promise((resolve, reject) => {
    const c = capsule!;
    if (c.watchers > 0) return resolve();
    const timer = setTimeout(() => reject(new Error('the gateway never watched the capsule')), timeoutMs);
    const on = (n: number): void => {
      if (n < 1) return;
      clearTimeout(timer);
      c.off('watchers', on);
      resolve();
    };
    c.on('watchers', on);
  });

/** POSTs nchan has not answered yet (it throttles its publishers under overload): wait, bounded. */
const settled = async (maxBehind: number): Promise<number> => {
  const deadline = Date.now() + 10_000;
  while (inFlight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  return maxBehind;
};

/** Publish on a 1 ms timer, catching up to the schedule (a load generator, not a correctness wait). */
const run = ({ rate, count, marks }: Run): Promise<number> =>
  new Promise((resolve) => {
    const t0 = performance.now();
    let seq = 0;
    let maxBehind = 0;
    const timer = setInterval(() => {
      const due = Math.min(count, Math.floor(((performance.now() - t0) * rate) / 1000) + 1);
      maxBehind = Math.max(maxBehind, due - seq);
      while (seq < due) {
        publish!(++seq);
        if (marks.includes(seq)) process.send?.({ type: 'mark', seq });
      }
      if (seq >= count) {
        clearInterval(timer);
        resolve(maxBehind);
      }
    }, 1);
  });

process.on('message', (msg: { type: string; url?: string } & Partial<Run>) => {
  const fail = (err: unknown): void => void process.send?.({ type: 'error', error: String(err) });
  if (msg.type === 'nchan') {
    startNchan(msg.url!);
    process.send?.({ type: 'ready' });
  } else if (msg.type === 'capsule') {
    const acceptance = (msg as { acceptance?: 'queue' }).acceptance;
    startCapsule(acceptance).then((url) => process.send?.({ type: 'ready', url }), fail);
  } else if (msg.type === 'contexts') {
    contexts().then((list) => process.send?.({ type: 'contexts', contexts: list }), fail);
  } else if (msg.type === 'workload') {
    startWorkload((msg as unknown as { spec: WorkloadSpec }).spec);
    process.send?.({ type: 'workload' });
  } else if (msg.type === 'watched') {
    waitWatched(20_000).then(() => process.send?.({ type: 'watched' }), fail);
  } else if (msg.type === 'run') {
    run(msg as Run)
      .then(settled)
      // capsuleDropped: frames the capsule dropped to a lagging gateway watch (lost before the log).
      .then(
        (maxBehind) =>
          process.send?.({
            type: 'done',
            maxBehind,
            inFlight,
            failed,
            capsuleDropped: capsule?.droppedToWatchers ?? 0,
          }),
        fail,
      );
  } else if (msg.type === 'stop') {
    void (capsule?.stop() ?? Promise.resolve()).finally(() => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
