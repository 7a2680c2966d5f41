/**
 * POST …/tasks: one task per (owner, idempotency key) across every replica. The registry (derived
 * from the log) answers a retry once the first task's record is durable; the window before that,
 * two replicas checking the log at the same instant, is closed by a claim on the key (core.claimOnce)
 * held until the first task has its outcome recorded. A request that finds the key claimed waits
 * for the claim's holder to finish and then answers with the task it made.
 */
import { randomUUID } from 'node:crypto';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { claimOrSettled } from '../../src/core/claim-wait.js';
import type { HeldClaim } from '../../src/core/types.js';
import type { Channel, ChannelRegistry } from './channels.js';
import { BeeosError } from './errors.js';
import { outcomeError, recordOutcome, submitMessage } from './submit.js';

export interface TaskRequest {
  agent: string;
  owner: string;
  message: string;
  contextId?: string;
  key?: string;
  metadata?: unknown;
}

export type TaskAnswer = { existing: Channel } | { created: Channel };

/** The task an earlier request with the same key made, or the claim to make it (key given). */
const existingOrClaim = async (
  deps: AdapterDeps,
  registry: ChannelRegistry,
  req: TaskRequest & { key: string },
): Promise<{ existing: Channel } | { claim: HeldClaim }> => {
  const got = await claimOrSettled(deps.core, req.agent, `beeos:task:${req.owner}\u0000${req.key}`, {
    settled: () => registry.byIdempotencyKey(req.agent, req.owner, req.key),
    busy: () => new BeeosError('conflict', 'a request with this idempotency_key is in progress'),
  });
  return 'claim' in got ? got : { existing: got.settled };
};

/** Create the task, or return the one an earlier request with the same key created. */
export const createTask = async (
  deps: AdapterDeps,
  registry: ChannelRegistry,
  req: TaskRequest,
): Promise<TaskAnswer> => {
  let claim: HeldClaim | null = null;
  if (req.key !== undefined) {
    const found = await existingOrClaim(deps, registry, { ...req, key: req.key });
    if ('existing' in found) return found;
    claim = found.claim;
  }
  try {
    return { created: await submitTask(deps, registry, req) };
  } finally {
    await claim?.release();
  }
};

const submitTask = async (
  deps: AdapterDeps,
  registry: ChannelRegistry,
  req: TaskRequest,
): Promise<Channel> => {
  const { agent, owner, key } = req;
  const id = `task_${randomUUID()}`;
  const channel: Channel = {
    id,
    kind: 'task',
    capsule: agent,
    owner,
    contextId: req.contextId ?? `ch-${randomUUID()}`,
    startOffset: 0,
    createdAt: Date.now(),
    closed: false,
    text: req.message,
    ...(key ? { idempotencyKey: key } : {}),
  };
  const submitting = submitMessage(deps, agent, owner, channel.contextId, req.message, {
    op: 'task',
    channelId: id,
    kind: 'task',
    ...(key ? { idempotencyKey: key } : {}),
    ...(req.metadata !== undefined ? { metadata: req.metadata } : {}),
  });
  channel.pending = submitting;
  // Settled into a value at once: a refusal (a full queue answers in microseconds) may arrive while
  // the registry's add below is still in flight, and a rejection with no handler yet ends the process.
  const settled = submitting.then(
    (sub) => ({ sub }),
    (err: unknown) => ({ err }),
  );
  let outcome;
  try {
    await registry.add(channel);
  } finally {
    outcome = await settled;
    delete channel.pending;
  }
  if ('err' in outcome) {
    await registry.remove(channel);
    throw outcome.err;
  }
  const { sub } = outcome;
  channel.startOffset = sub.result.recorded.offset;
  channel.createdAt = sub.receivedAt;
  if (sub.result.outcome.kind === 'accepted') channel.upstreamTaskIds = [sub.result.outcome.taskId];
  // Recorded before answering: a cancel or retry on another replica right after the answer sees it.
  await recordOutcome(deps, agent, owner, channel.contextId, id, sub);
  const error = outcomeError(sub.result.outcome);
  if (error) throw error;
  return channel;
};
