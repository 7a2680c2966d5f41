/**
 * A simulated capsule in its own process (`murmur-gateway simulate`), as a real capsule would be: it
 * keeps writing while the test process is busy or stalled. Used by tests and benchmarks.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';

/** Start `simulate --port 0 …extraArgs`; resolves with its door URL once it listens. */
export const startSimulatorProcess = async (
  extraArgs: string[] = [],
): Promise<{ url: string; child: ChildProcess }> => {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli.ts', 'simulate', '--port', '0', ...extraArgs],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  for await (const line of createInterface({ input: child.stdout! })) {
    const m = /"url":"([^"]+)"/.exec(line);
    if (m?.[1]) return { url: m[1], child };
  }
  throw new Error('simulator process printed no url');
};

/**
 * Submit with `message/stream`; resolves with the task id (from its first frame) and a promise that
 * settles when the capsule has closed the stream (drained in the background).
 */
export const submitTask = async (
  url: string,
  text: string,
): Promise<{ taskId: string; drained: Promise<void> }> => {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'message/stream',
      params: { message: { messageId: randomUUID(), role: 'user', parts: [{ text }] } },
    }),
  });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffered = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error('message/stream ended before the task started');
    buffered += decoder.decode(value, { stream: true });
    const m = /"id":"(tsk_[0-9a-f]+)"/.exec(buffered);
    if (m?.[1]) {
      const drained = (async () => {
        while (!(await reader.read()).done);
      })();
      drained.catch(() => {});
      return { taskId: m[1], drained };
    }
  }
};
