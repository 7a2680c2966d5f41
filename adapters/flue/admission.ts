/**
 * §POST /:id message admission: body validation (zod), the text a capsule receives, uid and
 * idempotency conditions, and recording + forwarding through `core.submit`. A submission that never
 * reaches a task (busy, unreachable, refused) is settled `failed` by appending a settlement record.
 */
import { createHash, randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { Logger } from 'pino';
import { claimWhenFree } from '../../src/core/claim-wait.js';
import type { GatewayCore, SubmitOutcome } from '../../src/core/types.js';
import type { SubmissionEntry } from '../../src/log/record.js';
import { formatOffset } from './codec.js';
import {
  MAX_ATTACHMENT_CHARS,
  MAX_IDEMPOTENCY_KEY,
  ORIGIN_OFFSET,
  RECORD_KIND,
  TAG_NAME,
} from './constants.js';
import type { ConversationIndex } from './conversation-index.js';
import { FlueError } from './errors.js';
import type { MessageMeta, SettlementMeta } from './projection.js';

const siblings = {
  initialData: z.unknown().optional(),
  uid: z.string().nullable().optional(),
  idempotencyKey: z.string().min(1).max(MAX_IDEMPOTENCY_KEY).optional(),
};

const attachment = z.object({
  type: z.literal('image'),
  data: z.string().max(MAX_ATTACHMENT_CHARS),
  mimeType: z.string(),
  filename: z.string().optional(),
});

const promptBody = z.discriminatedUnion('kind', [
  z.object({
    kind: z.literal('user'),
    body: z.string(),
    attachments: z.array(attachment).optional(),
    ...siblings,
  }),
  z.object({
    kind: z.literal('signal'),
    type: z.string().min(1),
    body: z.string(),
    attributes: z.record(z.string(), z.string()).optional(),
    tagName: z.string().regex(TAG_NAME).optional(),
    ...siblings,
  }),
]);

export type PromptBody = z.infer<typeof promptBody>;

const invalid = (message: string, details = ''): FlueError =>
  new FlueError('invalid_request', message, details);

/** Validate a parsed JSON body (§POST rules); throws `invalid_request`. */
export const parsePromptBody = (json: unknown): PromptBody => {
  if (typeof json !== 'object' || json === null || Array.isArray(json))
    throw invalid('the body must be a DeliveredMessage object');
  const parsed = promptBody.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw invalid('invalid message body', issue ? `${issue.path.join('.') || 'body'}: ${issue.message}` : '');
  }
  const body = parsed.data;
  if (body.kind === 'user' && body.attachments && body.attachments.length > 0)
    throw invalid('attachments are not supported', 'capsules take text only');
  if (typeof body.uid === 'string' && body.initialData !== undefined)
    throw invalid('uid and initialData contradict each other', 'a string uid forbids creation');
  return body;
};

const escapeAttr = (v: string): string =>
  v.replace(/&/g, '&amp;').replace(/"/g, '&quot;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The capsule's message text: the body, or for a signal the body in its `tagName`/`type` envelope. */
const capsuleText = (body: PromptBody): string => {
  if (body.kind === 'user') return body.body;
  const name = body.tagName ?? (TAG_NAME.test(body.type) ? body.type : 'signal');
  const attrs = { ...(name === body.type ? {} : { type: body.type }), ...(body.attributes ?? {}) };
  const rendered = Object.entries(attrs)
    .filter(([k]) => TAG_NAME.test(k))
    .map(([k, v]) => ` ${k}="${escapeAttr(v)}"`)
    .join('');
  return `<${name}${rendered}>${body.body}</${name}>`;
};

/** What makes two sends "the same payload" for an idempotency key. */
const fingerprint = (body: PromptBody): string => {
  const { uid: _u, idempotencyKey: _k, ...rest } = body;
  const sorted = JSON.stringify(rest, (_key, value: unknown) =>
    value && typeof value === 'object' && !Array.isArray(value)
      ? Object.fromEntries(
          Object.entries(value as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b)),
        )
      : value,
  );
  return createHash('sha256').update(sorted).digest('hex');
};

export interface AdmissionReceipt {
  submissionId: string;
  uid: string;
  offset: string;
  deduplicated?: true;
}

const failureOf = (outcome: SubmitOutcome): string | null => {
  switch (outcome.kind) {
    case 'accepted':
    case 'queued':
      return null;
    case 'rejected':
      return 'capsule is busy: task rejected';
    case 'invalid':
      return 'capsule refused the message';
    case 'method-not-found':
      return 'capsule accepts no tasks';
    case 'unreachable':
      return `capsule unreachable: ${outcome.reason}`;
  }
};

/** Admits messages; one admission at a time per conversation so conditions and order hold. */
export class Admissions {
  private readonly chains = new Map<string, Promise<unknown>>();
  /** Tasks the capsule accepted, per conversation (newest last), so abort can reach queued ones. */
  readonly accepted = new Map<string, string[]>();

  constructor(
    private readonly core: GatewayCore,
    private readonly index: ConversationIndex,
    private readonly logger: Logger,
  ) {}

  /** `owner`: the caller's principal, so the queue's per-owner bound counts Flue and BeeOS alike. */
  admit(capsule: string, conversationId: string, body: PromptBody, owner: string): Promise<AdmissionReceipt> {
    const key = `${capsule}\u0000${conversationId}`;
    const run = (this.chains.get(key) ?? Promise.resolve())
      .catch(() => undefined)
      .then(() => this.admitClaimed(capsule, conversationId, body, owner));
    this.chains.set(key, run);
    void run
      .finally(() => {
        if (this.chains.get(key) === run) this.chains.delete(key);
      })
      .catch(() => undefined);
    return run;
  }

  /**
   * The chain above orders one conversation's admissions in this process; across replicas a claim
   * on the conversation does (two replicas admitting the same idempotency key, or both creating the
   * conversation, at the same instant). It is held until the admitted message has its outcome, so
   * the next holder's index, read from the log, already holds its record.
   */
  private async admitClaimed(
    capsule: string,
    conversationId: string,
    body: PromptBody,
    owner: string,
  ): Promise<AdmissionReceipt> {
    const claim = await claimWhenFree(
      this.core,
      capsule,
      `flue:conversation:${conversationId}`,
      () => new FlueError('runtime_unavailable', 'another admission of this conversation is still running'),
    );
    try {
      return await this.admitNow(capsule, conversationId, body, owner);
    } finally {
      await claim.release();
    }
  }

  private async admitNow(
    capsule: string,
    conversationId: string,
    body: PromptBody,
    owner: string,
  ): Promise<AdmissionReceipt> {
    const view = await this.index.lookup(capsule, conversationId);
    const print = fingerprint(body);
    if (body.idempotencyKey !== undefined) {
      const receipt = view.receipt(body.idempotencyKey);
      if (receipt && receipt.fingerprint !== print)
        throw new FlueError('submission_conflict', 'idempotency key reused with a different payload', '', {
          submissionId: receipt.submissionId,
        });
      // §SDK idempotencyKey: a replay echoes the original receipt; its offset is the stream origin.
      if (receipt)
        return {
          submissionId: receipt.submissionId,
          uid: receipt.uid,
          offset: ORIGIN_OFFSET,
          deduplicated: true,
        };
    }
    const existing = view.conversation;
    if (body.uid === null && existing)
      throw new FlueError(
        'agent_instance_exists',
        'the conversation already exists',
        `existing uid: ${existing.uid}`,
        {
          uid: existing.uid,
        },
      );
    if (typeof body.uid === 'string' && existing?.uid !== body.uid)
      throw new FlueError('agent_instance_not_found', 'no conversation with that uid', `uid: ${body.uid}`);
    const uid = existing?.uid ?? `uid_${randomUUID()}`;
    const submissionId = `sub_${randomUUID()}`;
    const messageId = `msg_${randomUUID()}`;
    const meta: MessageMeta = {
      flue: RECORD_KIND.message,
      submissionId,
      uid,
      kind: body.kind,
      body: body.body,
      ...(body.kind === 'signal'
        ? {
            signal: {
              type: body.type,
              ...(body.tagName ? { tagName: body.tagName } : {}),
              ...(body.attributes ? { attributes: body.attributes } : {}),
            },
          }
        : {}),
      ...(body.idempotencyKey !== undefined
        ? { idempotencyKey: body.idempotencyKey, fingerprint: print }
        : {}),
    };
    const result = await this.core.submit(capsule, {
      text: capsuleText(body),
      contextId: conversationId,
      messageId,
      record: { protocol: 'flue', owner, meta: meta as unknown as Record<string, unknown> },
      queue: true,
    });
    const failure = failureOf(result.outcome);
    if (result.outcome.kind === 'accepted')
      this.remember(`${capsule}\u0000${conversationId}`, result.outcome.taskId);
    if (failure !== null) await this.settleFailed(capsule, conversationId, messageId, submissionId, failure);
    return { submissionId, uid, offset: formatOffset(result.recorded.epoch, result.recorded.offset) };
  }

  private remember(key: string, taskId: string): void {
    const list = this.accepted.get(key) ?? [];
    list.push(taskId);
    if (list.length > 16) list.shift();
    this.accepted.set(key, list);
  }

  /** The admitted message will never run: record its failed settlement so every reader sees it. */
  private async settleFailed(
    capsule: string,
    contextId: string,
    messageId: string,
    submissionId: string,
    message: string,
  ): Promise<void> {
    const meta: SettlementMeta = {
      flue: RECORD_KIND.settlement,
      submissionId,
      outcome: 'failed',
      error: { message },
    };
    const entry: SubmissionEntry = {
      kind: 'submission',
      protocol: 'flue',
      owner: null,
      contextId,
      messageId,
      text: '',
      meta: meta as unknown as Record<string, unknown>,
      receivedAt: Date.now(),
    };
    try {
      await this.core.append(capsule, entry);
    } catch (err) {
      this.logger.error({ err, capsule, submissionId }, 'flue: could not record a failed settlement');
    }
  }
}
