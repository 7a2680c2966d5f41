/**
 * One soak capsule in its own process: the simulator (src/simulator) with a busy workload, driven
 * over the IPC channel (`fork`), so it keeps writing while the soak's own process is busy, and so it
 * can report exactly what it wrote (`written`), restart its session, and write a burst on request.
 * Started by capsule-fleet.ts; the long soak (long-soak.ts) is its only user.
 *
 * Messages in (`CapsuleCommand`) each get one answer `{ seq, ok, value | error }`.
 */
import {
  startSimulator,
  type SimRelease,
  type SimulatorOptions,
  type WrittenFrame,
} from '../../src/simulator/index.js';

export type CapsuleCommand =
  | { seq: number; op: 'restart' }
  | { seq: number; op: 'burst'; frames: number }
  /** Stop the workload, wait for the queue to drain, run one last task; answers its task id. */
  | { seq: number; op: 'settle' }
  | { seq: number; op: 'written' }
  /** Frames the capsule dropped to `stream/watch` readers that fell behind (the spec's silent loss). */
  | { seq: number; op: 'dropped' }
  | { seq: number; op: 'stop' };

export type CapsuleAnswer =
  { seq: number; ok: true; value: unknown } | { seq: number; ok: false; error: string };

const send = (answer: CapsuleAnswer): void => void process.send?.(answer);

const main = async (): Promise<void> => {
  const release = (process.env.SOAK_RELEASE ?? 'spec') as SimRelease;
  const queue = Number(process.env.SOAK_QUEUE ?? '0');
  const options: SimulatorOptions = {
    taskAcceptance: 'queue',
    release,
    ...(queue > 0 ? { connectionQueue: queue } : {}),
  };
  const sim = await startSimulator(options);
  let stopping = false;
  // A busy capsule: tasks back to back, each ~25 frames over ~0.8 s, every fifth reopened (its
  // attempt repeats the previous one byte for byte). Bounded: the soak settles long before the cap.
  const workload = (async () => {
    for (let i = 0; !stopping && i < 100_000; i++) {
      const reopen = i % 5 === 4;
      await sim.submit(`#sim ${JSON.stringify({ chunks: 20, thinking: 2, delayMs: 35, reopen })}`).done;
    }
  })();

  process.on('message', (raw: CapsuleCommand) => {
    void (async (): Promise<unknown> => {
      switch (raw.op) {
        case 'restart':
          await sim.restart();
          return sim.session;
        case 'burst':
          // Queued behind the running task: one task writing `frames` chunks back to back.
          void sim.submit(`#sim ${JSON.stringify({ chunks: raw.frames, burst: true })}`).done;
          return null;
        case 'settle': {
          stopping = true;
          await workload;
          await sim.idle();
          const last = sim.submit('sentinel');
          await last.done;
          return last.taskId;
        }
        case 'written':
          return sim.written satisfies WrittenFrame[];
        case 'dropped':
          return sim.droppedToWatchers;
        case 'stop':
          stopping = true;
          await sim.stop();
          setImmediate(() => process.exit(0));
          return null;
      }
    })().then(
      (value) => send({ seq: raw.seq, ok: true, value }),
      (err: unknown) => send({ seq: raw.seq, ok: false, error: String(err) }),
    );
  });
  send({ seq: 0, ok: true, value: { url: sim.url, port: sim.port } });
};

void main().catch((err: unknown) => {
  send({ seq: 0, ok: false, error: String(err) });
  process.exit(1);
});
