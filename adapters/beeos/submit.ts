/**
 * Submitting a caller message through core.submit for tasks, conversation turns and invoke, and
 * turning a refused or failed submission into a durable `outcome` record plus the contract's error.
 */
import { randomUUID } from 'node:crypto';
import type { SubmitOutcome, SubmitResult } from '../../src/core/types.js';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { BeeosError } from './errors.js';
import type { BeeosErrorCode } from './errors.js';
import { beeosEntry } from './records.js';
import type { BeeosMeta } from './records.js';

export interface Submitted {
  result: SubmitResult;
  messageId: string;
  receivedAt: number;
}

export const submitMessage = async (
  deps: AdapterDeps,
  capsule: string,
  owner: string,
  contextId: string,
  text: string,
  meta: BeeosMeta,
  /** Through the capsule's submission queue (tasks, conversation turns); invoke is sent at once. */
  queue = true,
): Promise<Submitted> => {
  const messageId = randomUUID();
  const receivedAt = Date.now();
  const result = await deps.core.submit(capsule, {
    text,
    contextId,
    messageId,
    record: { protocol: 'beeos', owner, meta: { beeos: meta } },
    queue,
  });
  return { result, messageId, receivedAt };
};

const OUTCOME_ERROR: Record<
  Exclude<SubmitOutcome['kind'], 'accepted' | 'queued'>,
  [BeeosErrorCode, string]
> = {
  rejected: ['conflict', 'agent is busy and refused the message'],
  'method-not-found': ['conflict', 'agent does not accept tasks'],
  unreachable: ['agent_service_unavailable', 'agent service is unavailable'],
  invalid: ['internal_error', 'internal error'],
};

/** The error a non-accepted outcome answers with (before any streaming). */
export const outcomeError = (outcome: SubmitOutcome): BeeosError | null => {
  if (outcome.kind === 'accepted' || outcome.kind === 'queued') return null;
  const [code, message] = OUTCOME_ERROR[outcome.kind];
  return new BeeosError(code, message);
};

/**
 * Record a submission's outcome in the channel, best effort. A refusal or failure shows as
 * `agent_busy` / `agent_reply_error` (a task ends `task_terminal`); an acceptance carries the
 * capsule's task id, so every replica (and a rebuild) can cancel the task and attribute its frames
 * even before, or without, its first frame in the log.
 */
export const recordOutcome = async (
  deps: AdapterDeps,
  capsule: string,
  owner: string,
  contextId: string,
  channelId: string,
  submitted: Submitted,
): Promise<void> => {
  const outcome = submitted.result.outcome;
  // Queued: the log says the rest (its task's frames, or its withdrawal).
  if (outcome.kind === 'queued') return;
  const err = outcomeError(outcome);
  const meta: BeeosMeta =
    outcome.kind === 'accepted'
      ? {
          op: 'outcome',
          channelId,
          outcome: 'accepted',
          taskId: outcome.taskId,
          inReplyTo: submitted.messageId,
        }
      : {
          op: 'outcome',
          channelId,
          outcome: outcome.kind,
          code: err?.code ?? 'internal_error',
          message: err?.message ?? 'internal error',
          inReplyTo: submitted.messageId,
        };
  try {
    await deps.core.append(capsule, beeosEntry(owner, contextId, randomUUID(), meta));
  } catch (e) {
    deps.logger.warn({ err: e, capsule, channelId }, 'beeos: could not record a submission outcome');
  }
};
