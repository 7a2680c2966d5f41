/**
 * The busy capsule of the surface fan-out bench (fanout-surfaces.ts): many conversations, each with
 * a streaming task that writes `chunksPerTask` text chunks, then its end-of-chunks marker and its
 * `completed` status, after which the conversation's next task starts. Chunks go to conversations
 * in turn, so at a total rate R each of N conversations streams R / N chunks/s. Each chunk's text
 * carries `@<seq>@<publish ms>@`, padded to `textBytes`.
 *
 * Tasks of many contexts interleave on one watch here, which a real capsule running one task at a
 * time would not do; the watch's wire format allows it (frames carry their task id) and the gateway
 * attributes frames by task id, so it is the cheapest way to keep 100 conversations busy at once.
 * Frames are built as run-script.ts builds them (working status with the context, chunks, `""`
 * final, completed with the whole reply), each task numbering its own ids from 0.
 */
import { Counter, mintContextId, mintTaskId, TASK_COUNTER_START } from '../../src/simulator/ids.js';
import { statusFrame, textFrame, type Frame } from '../../src/simulator/frames.js';
import { nowMs } from './fanout-event.js';

export interface WorkloadSpec {
  /** The conversations' context ids (as the capsule saw them); `conversations` fresh ones if absent. */
  contexts?: string[];
  conversations: number;
  chunksPerTask: number;
  textBytes: number;
}

interface Running {
  taskId: string;
  counter: Counter;
  chunks: string[];
}

/** A writer of the workload's frames: `frames(seq)` is what publishing chunk `seq` writes, in order. */
export const conversationsWorkload = (spec: WorkloadSpec): ((seq: number) => Frame[]) => {
  const contexts = spec.contexts ?? Array.from({ length: spec.conversations }, () => mintContextId());
  const running = new Array<Running | null>(contexts.length).fill(null);
  return (seq) => {
    const i = (seq - 1) % contexts.length;
    const contextId = contexts[i]!;
    const out: Frame[] = [];
    let task = running[i];
    if (!task) {
      task = { taskId: mintTaskId(), counter: new Counter(TASK_COUNTER_START), chunks: [] };
      running[i] = task;
      const message = 'inference turn 1';
      out.push(
        statusFrame({ taskId: task.taskId, contextId, state: 'working', message }, task.counter.next()),
      );
    }
    const head = `@${seq}@${nowMs().toFixed(3)}@`;
    const text = head + '.'.repeat(Math.max(0, spec.textBytes - head.length));
    task.chunks.push(text);
    out.push(textFrame(task.taskId, text, false, task.counter.next()));
    if (task.chunks.length >= spec.chunksPerTask) {
      out.push(textFrame(task.taskId, '', true, task.counter.next()));
      const response = task.chunks.join('');
      out.push(
        statusFrame(
          { taskId: task.taskId, contextId, state: 'completed', message: 'session ended', response },
          task.counter.next(),
        ),
      );
      running[i] = null;
    }
    return out;
  };
};
