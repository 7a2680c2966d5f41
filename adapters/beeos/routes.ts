/**
 * Thin Hono handlers for every BeeOS route under /api/v1/agents/{agent}/… (the BeeOS
 * OpenAPI's resources). Parsing/guards in http-helpers.ts, projection and streams in channel-stream.ts/invoke.ts.
 */
import { clientContext, ownerContext } from '../../src/auth/namespace.js';
import { randomUUID } from 'node:crypto';
import type { Hono } from 'hono';
import type { Context } from 'hono';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { ChannelRegistry, listedAt } from './channels.js';
import type { Channel } from './channels.js';
import { openChannelStream, projectChannel } from './channel-stream.js';
import { ChannelFeeds } from './channel-feeds.js';
import { AGENTS_PREFIX, DEFAULT_INVOKE_TIMEOUT_MS } from './constants.js';
import { BeeosError } from './errors.js';
import {
  conversationBodySchema,
  guardAgent,
  guardChannel,
  handle,
  messageBodySchema,
  parseBody,
  parseIncludeDeltas,
  parseConversationList,
  parseLimit,
  parseSince,
} from './http-helpers.js';
import type { Env } from './http-helpers.js';
import { collectInvoke, streamInvoke } from './invoke.js';
import type { Envelope } from './projection.js';
import { receivedIso as iso } from '../../src/log/record.js';
import { beeosEntry } from './records.js';
import { outcomeError, recordOutcome, submitMessage } from './submit.js';
import { createTask } from './create-task.js';

export interface BeeosRouteOptions {
  /** How long invoke waits for the final status before `service_timeout`. */
  invokeTimeoutMs?: number;
  /** How long invoke waits for a lost capsule to come back before 503 (default: one heartbeat, ≥ 2 s). */
  upstreamLostGraceMs?: number;
  /** Bytes queued for one channel stream's client before it is cut (transport default: 1 MiB). */
  maxQueuedBytes?: number;
  /** The channel registry, shared with the surface's follow source (follow.ts); default: a new one. */
  registry?: ChannelRegistry;
}

const ok = (c: Context<Env>, data: unknown, status: 200 | 201 | 202 = 200): Response =>
  c.json({ success: true, data }, status);
const wantsSse = (c: Context): boolean => /text\/event-stream/i.test(c.req.header('Accept') ?? '');

/** Register the BeeOS routes on `app` (full paths). */
export const registerBeeosRoutes = (app: Hono<Env>, deps: AdapterDeps, options: BeeosRouteOptions = {}) => {
  const { core } = deps;
  const registry = options.registry ?? new ChannelRegistry(core);
  // One live feed per capsule for every BeeOS channel stream of this process; the registry follows
  // the log through it too.
  const feeds = new ChannelFeeds(core, deps.logger);
  feeds.observe((capsule, records, before) => registry.observe(capsule, records, before));
  const invokeTimeoutMs = options.invokeTimeoutMs ?? DEFAULT_INVOKE_TIMEOUT_MS;
  const A = `${AGENTS_PREFIX}/:agent`;

  app.post(
    `${A}/invoke`,
    handle(async (c) => {
      const { owner, agent, principal } = guardAgent(deps, c);
      const body = await parseBody(c, messageBodySchema, { required: ['message'] });
      // A chosen context is namespaced by owner upstream: it can never join another owner's.
      const contextId = body.context_id ? ownerContext(principal, body.context_id) : `ch-${randomUUID()}`;
      // A one-shot blocking call: sent at once (a busy agent answers `conflict`), never queued.
      const sub = await submitMessage(deps, agent, owner, contextId, body.message, { op: 'invoke' }, false);
      const outcome = sub.result.outcome;
      if (outcome.kind !== 'accepted') throw outcomeError(outcome);
      const target = {
        capsule: agent,
        taskId: outcome.taskId,
        contextId,
        after: sub.result.recorded.offset,
        timeoutMs: invokeTimeoutMs,
        lostGraceMs: options.upstreamLostGraceMs ?? Math.max(2_000, deps.config.heartbeatMs),
      };
      if (wantsSse(c)) return streamInvoke(c, deps, target, c.req.raw.signal);
      const r = await collectInvoke(deps, target, c.req.raw.signal);
      if (r.error) throw new BeeosError(r.error.code, r.error.message);
      const { type: _type, ...done } = r.done;
      return ok(c, { ...done, task_id: outcome.taskId, ...(r.reasoning ? { reasoning: r.reasoning } : {}) });
    }),
  );

  const taskData = async (channel: Channel) => {
    const p = await projectChannel(core, channel);
    return {
      projector: p,
      data: {
        task_id: channel.id,
        agent_id: channel.capsule,
        context_id: clientContext(channel.contextId),
        status: p.status,
        created_at: iso(channel.createdAt),
        updated_at: iso(p.updatedAt ?? channel.createdAt),
        ...(p.result !== null ? { result: p.result } : {}),
        ...(p.error !== null ? { error: p.error } : {}),
      },
    };
  };

  app.post(
    `${A}/tasks`,
    handle(async (c) => {
      const { owner, agent, principal } = guardAgent(deps, c);
      const body = await parseBody(c, messageBodySchema, { required: ['message'] });
      const key = body.idempotency_key;
      const answer = await createTask(deps, registry, {
        agent,
        owner,
        message: body.message,
        ...(body.context_id ? { contextId: ownerContext(principal, body.context_id) } : {}),
        ...(key ? { key } : {}),
        ...(body.metadata !== undefined ? { metadata: body.metadata } : {}),
      });
      if ('created' in answer) {
        const created = answer.created;
        return ok(
          c,
          { task_id: created.id, agent_id: agent, status: 'queued', created_at: iso(created.createdAt) },
          202,
        );
      }
      const existing = answer.existing;
      if (existing.text !== undefined && existing.text !== body.message)
        throw new BeeosError('conflict', 'idempotency_key was already used with another message');
      if (existing.pending) await existing.pending.catch(() => undefined);
      const { data } = await taskData(existing);
      if (data.status === 'rejected') throw new BeeosError('conflict', 'agent is busy and refused the task');
      return ok(
        c,
        { task_id: data.task_id, agent_id: agent, status: data.status, created_at: data.created_at },
        202,
      );
    }),
  );

  app.get(
    `${A}/tasks/:id`,
    handle(async (c) => {
      const { owner, agent } = guardAgent(deps, c);
      const channel = await guardChannel(registry, agent, c.req.param('id') ?? '', 'task', owner);
      return ok(c, (await taskData(channel)).data);
    }),
  );

  app.post(
    `${A}/tasks/:id/cancel`,
    handle(async (c) => {
      const { owner, agent } = guardAgent(deps, c);
      const channel = await guardChannel(registry, agent, c.req.param('id') ?? '', 'task', owner);
      const { projector } = await taskData(channel);
      if (!channel.closed) {
        channel.closed = true;
        // The close record goes first so the stream ends `channel_closed` (BeeOS "Streaming" §3),
        // not `task_terminal` on the capsule's `canceled` status that follows.
        await core.append(
          agent,
          beeosEntry(owner, channel.contextId, randomUUID(), {
            op: 'close',
            channelId: channel.id,
            reason: 'cancel',
          }),
        );
        // Queued, it never reaches the agent; handed over already, its task is canceled.
        await core.withdrawContext(agent, channel.contextId, 'aborted', 'task canceled');
        if (!projector.terminal) {
          const taskIds = new Set([...(channel.upstreamTaskIds ?? []), ...projector.taskIds()]);
          for (const taskId of taskIds) await core.cancel(agent, taskId);
        }
      }
      const status = projector.terminal ? projector.status : 'canceled';
      return ok(c, { task_id: channel.id, agent_id: agent, status });
    }),
  );

  app.post(
    `${A}/conversations`,
    handle(async (c) => {
      const { owner, agent } = guardAgent(deps, c);
      await parseBody(c, conversationBodySchema, { allowEmpty: true });
      const id = `conv_${randomUUID()}`;
      const contextId = `ch-${randomUUID()}`;
      const at = await core.append(
        agent,
        beeosEntry(owner, contextId, randomUUID(), {
          op: 'conversation-open',
          channelId: id,
          kind: 'conversation',
        }),
      );
      const createdAt = Date.now();
      await registry.add({
        id,
        kind: 'conversation',
        capsule: agent,
        owner,
        contextId,
        startOffset: at.offset,
        createdAt,
        closed: false,
      });
      return ok(
        c,
        { conversation_id: id, agent_id: agent, state: 'active', created_at: iso(createdAt) },
        201,
      );
    }),
  );

  const conversationData = (channel: Channel) => ({
    conversation_id: channel.id,
    agent_id: channel.capsule,
    context_id: clientContext(channel.contextId),
    state: channel.closed ? 'closed' : 'active',
    created_at: iso(channel.createdAt),
  });

  app.get(
    `${A}/conversations`,
    handle(async (c) => {
      const { owner, agent } = guardAgent(deps, c);
      const { state, after, limit } = parseConversationList(c);
      // Cursor: the creation offset of the last one listed (conversations are listed oldest first).
      const listed = (await registry.conversations(agent, owner)).filter(
        (ch) => listedAt(ch) > after && (state === 'all' || (state === 'closed') === ch.closed),
      );
      const page = listed.slice(0, limit);
      const last = page.at(-1);
      return ok(c, {
        conversations: page.map(conversationData),
        ...(listed.length > limit && last ? { next_since: String(listedAt(last)) } : {}),
      });
    }),
  );

  app.get(
    `${A}/conversations/:id`,
    handle(async (c) => {
      const { owner, agent } = guardAgent(deps, c);
      const channel = await guardChannel(registry, agent, c.req.param('id') ?? '', 'conversation', owner);
      return ok(c, conversationData(channel));
    }),
  );

  app.delete(
    `${A}/conversations/:id`,
    handle(async (c) => {
      const { owner, agent } = guardAgent(deps, c);
      const channel = await guardChannel(registry, agent, c.req.param('id') ?? '', 'conversation', owner);
      // A chat lives on its own surface, which has no close: closing it here would leave later
      // turns of the chat outside a conversation that said it ended.
      if (channel.chatId !== undefined)
        throw new BeeosError('conflict', 'this conversation is an AI SDK chat: it cannot be deleted');
      if (!channel.closed) {
        channel.closed = true;
        await core.append(
          agent,
          beeosEntry(owner, channel.contextId, randomUUID(), {
            op: 'close',
            channelId: channel.id,
            reason: 'delete',
          }),
        );
        await core.withdrawContext(agent, channel.contextId, 'aborted', 'conversation deleted');
      }
      return c.body(null, 204);
    }),
  );

  app.post(
    `${A}/conversations/:id/messages`,
    handle(async (c) => {
      const { owner, agent } = guardAgent(deps, c);
      const channel = await guardChannel(registry, agent, c.req.param('id') ?? '', 'conversation', owner);
      const body = await parseBody(c, messageBodySchema, { required: ['message'] });
      if (channel.closed) throw new BeeosError('conflict', 'conversation is closed');
      const sub = await submitMessage(deps, agent, owner, channel.contextId, body.message, {
        op: 'message',
        channelId: channel.id,
      });
      const error = outcomeError(sub.result.outcome);
      if (sub.result.outcome.kind === 'accepted')
        (channel.upstreamTaskIds ??= []).push(sub.result.outcome.taskId);
      await recordOutcome(deps, agent, owner, channel.contextId, channel.id, sub);
      if (error) throw error;
      return ok(c, { message_id: sub.messageId, created_at: iso(sub.receivedAt) }, 202);
    }),
  );

  for (const kind of ['task', 'conversation'] as const) {
    const base = `${A}/${kind}s/:id`;
    app.get(
      `${base}/events`,
      handle(async (c) => {
        const { owner, agent } = guardAgent(deps, c);
        const since = parseSince(c);
        const includeDeltas = parseIncludeDeltas(c);
        const channel = await guardChannel(registry, agent, c.req.param('id') ?? '', kind, owner);
        return openChannelStream(c, deps, feeds, channel, since, includeDeltas, options.maxQueuedBytes);
      }),
    );
    app.get(
      `${base}/messages`,
      handle(async (c) => {
        const { owner, agent } = guardAgent(deps, c);
        const since = parseSince(c);
        const limit = parseLimit(c);
        const includeDeltas = parseIncludeDeltas(c);
        const channel = await guardChannel(registry, agent, c.req.param('id') ?? '', kind, owner);
        const messages: Envelope[] = [];
        let more = false;
        const projector = await projectChannel(core, channel, (p) => {
          if (p.offset <= since || (p.delta && !includeDeltas)) return; // a skipped chunk is never built
          if (messages.length < limit) messages.push(p.envelope);
          else more = true;
        });
        return ok(c, { messages, latest_offset: projector.latestOffset, has_more: more });
      }),
    );
  }
};
