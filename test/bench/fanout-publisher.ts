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
 *
 * With `streams: S` (the follow bench, fanout-follow.ts) there are S capsules (or nchan channels),
 * `f0`…`f{S-1}`, and seq N goes to stream (N - 1) % S; nchan's bodies then carry their stream's key
 * in `GET /v1/follow`'s envelope (keyedEventData), since its multiplexed subscribers do not name
 * the channel a message came from.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { startSimulator, type SimulatedCapsule } from '../../src/simulator/index.js';
import { textFrame, type Frame } from '../../src/simulator/frames.js';
import type { Session } from '../../src/simulator/session.js';
import { eventData, eventText, keyedEventData, streamName } from './fanout-event.js';
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
/** Every capsule (one but with `streams`); `capsule` is the first. */
let capsules: SimulatedCapsule[] = [];
let inFlight = 0;
let failed = 0;

const startNchan = (url: string, streams?: number): void => {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  publish = (seq) => {
    inFlight++;
    const stream = streams ? streamName((seq - 1) % streams) : null;
    const body = stream ? keyedEventData(seq, `murmur:${stream}`) : eventData(seq, 'tsk_bench');
    const req = http.request(stream ? `${url}/${stream}` : url, {
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
const startCapsule = async (acceptance?: 'queue', streams?: number): Promise<string[]> => {
  if (streams) return startCapsules(streams);
  capsule = await startSimulator({
    heartbeatMs: 15_000,
    bufferSize: 4096,
    ...(acceptance ? { taskAcceptance: acceptance } : {}),
  });
  capsules = [capsule];
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
  return [capsule.url];
};

/** `streams` capsules, each holding one task open; seq N is a chunk of capsule (N - 1) % streams. */
const startCapsules = async (streams: number): Promise<string[]> => {
  capsules = await Promise.all(
    Array.from({ length: streams }, () => startSimulator({ heartbeatMs: 15_000, bufferSize: 4096 })),
  );
  capsule = capsules[0]!;
  const tasks = capsules.map((c) => c.submit('#sim {"hold":true}'));
  publish = (seq) => {
    const i = (seq - 1) % streams;
    const sim = capsules[i] as unknown as SimInternals;
    const session = sim.current;
    const task = tasks[i]!;
    const frame = textFrame(task.taskId, eventText(seq, task.taskId), false, session.chunk.next());
    session.buffer.push(frame);
    sim.broadcast(frame, session);
  };
  return capsules.map((c) => c.url);
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

/** Every capsule watched by the gateway (by some worker of it, with `--workers`). */
const waitWatched = (timeoutMs: number): Promise<void> =>
  Promise.all(
    capsules.map(
      (c) =>
        new Promise<void>((resolve, reject) => {
          if (c.watchers > 0) return resolve();
          const timer = setTimeout(
            () => reject(new Error('the gateway never watched the capsule')),
            timeoutMs,
          );
          const on = (n: number): void => {
            if (n < 1) return;
            clearTimeout(timer);
            c.off('watchers', on);
            resolve();
          };
          c.on('watchers', on);
        }),
    ),
  ).then(() => undefined);

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

process.on('message', (msg: { type: string; url?: string; streams?: number } & Partial<Run>) => {
  const fail = (err: unknown): void => void process.send?.({ type: 'error', error: String(err) });
  if (msg.type === 'nchan') {
    startNchan(msg.url!, msg.streams);
    process.send?.({ type: 'ready' });
  } else if (msg.type === 'capsule') {
    const acceptance = (msg as { acceptance?: 'queue' }).acceptance;
    startCapsule(acceptance, msg.streams).then(
      (urls) => process.send?.({ type: 'ready', url: urls[0], urls }),
      fail,
    );
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
            capsuleDropped: capsules.reduce((n, c) => n + c.droppedToWatchers, 0),
          }),
        fail,
      );
  } else if (msg.type === 'stop') {
    void Promise.all(capsules.map((c) => c.stop())).finally(() => process.exit(0));
  }
});
process.on('disconnect', () => process.exit(0));
