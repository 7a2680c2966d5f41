/**
 * `/ai-sdk/{capsule}/chat` for the AI SDK's `DefaultChatTransport` (docs/surfaces/ai-sdk.md): send
 * (POST), resume (GET …/{chatId}/stream), history (GET …/{chatId}/messages) and stop (POST
 * …/{chatId}/stop). A chat is a capsule context, namespaced by its owner as Flue conversations and
 * BeeOS channels are; messages go through the capsule's submission queue.
 */
import { randomUUID } from 'node:crypto';
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { ownerContext } from '../../src/auth/namespace.js';
import { may, principalOf, seesCapsule, type Principal } from '../../src/auth/principal.js';
import type { SubmitOutcome } from '../../src/core/types.js';
import { GatewayError } from '../../src/errors.js';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { countUnexpected } from '../../src/http/unexpected-errors.js';
import type { SubmissionEntry } from '../../src/log/record.js';
import { readChat, streamTurn } from './chat-stream.js';
import { AiSdkError, errorResponse, fromCoreError } from './errors.js';
import { ChatProjector } from './projection.js';
import type { AiSdkMeta } from './records.js';
import { checkId, parseSendBody } from './request.js';

export const PREFIX = '/ai-sdk/';
const CHAT = '/ai-sdk/:capsule/chat';

const JSON_HEADERS = { 'content-type': 'application/json', 'cache-control': 'no-store' };

const isJson = (contentType: string | undefined): boolean =>
  (contentType ?? '').split(';')[0]?.trim().toLowerCase() === 'application/json';

/** Why a message the queue did not take will never run (null: it was taken). */
const refusal = (outcome: SubmitOutcome): string | null => {
  switch (outcome.kind) {
    case 'accepted':
    case 'queued':
      return null;
    case 'rejected':
      return 'the capsule is busy and refused the message';
    case 'invalid':
      return 'the capsule refused the message';
    case 'method-not-found':
      return 'the capsule accepts no tasks';
    case 'unreachable':
      return `the capsule is unreachable: ${outcome.reason}`;
  }
};

const methodNotAllowed = (allow: string): AiSdkError =>
  new AiSdkError('method_not_allowed', 'method not allowed', { allow });

export const createRoutes = (deps: AdapterDeps): Hono => {
  const { core, config, logger } = deps;

  /** Check the caller and the capsule, then run the handler; every failure in this surface's grammar. */
  const guarded =
    (handler: (c: Context, capsule: string, principal: Principal) => Promise<Response>) =>
    async (c: Context): Promise<Response> => {
      try {
        const principal = principalOf(c);
        if (principal.kind === 'anonymous')
          throw new AiSdkError('unauthorized', 'a valid credential is required (Authorization: Bearer …)');
        const capsule = c.req.param('capsule') ?? '';
        if (!core.hasCapsule(capsule) || !seesCapsule(principal, capsule))
          throw new AiSdkError('not_found', 'unknown capsule');
        if (!may(principal, 'submit', capsule))
          throw new AiSdkError('forbidden', 'this credential lacks the "submit" scope');
        return await handler(c, capsule, principal);
      } catch (err) {
        if (err instanceof AiSdkError) return errorResponse(err);
        if (err instanceof GatewayError) return errorResponse(fromCoreError(err.code, err.details));
        countUnexpected('request');
        logger.error({ err, path: c.req.path }, 'ai-sdk: unhandled error');
        return errorResponse(new AiSdkError('internal_error', 'internal error'));
      }
    };

  /** The chat's context id: the client's id, namespaced by its owner. */
  const contextOf = (c: Context, principal: Principal): string =>
    ownerContext(principal, checkId('chat id', c.req.param('chatId') ?? ''));

  /** The message never reaches the capsule: a record ends its turn, on every replica and reload. */
  const recordRefusal = async (
    capsule: string,
    principal: Principal,
    contextId: string,
    inReplyTo: string,
    error: string,
  ): Promise<void> => {
    const meta: AiSdkMeta = { op: 'failed', inReplyTo, error };
    const entry: SubmissionEntry = {
      kind: 'submission',
      protocol: 'ai-sdk',
      owner: principal.owner,
      contextId,
      messageId: randomUUID(),
      text: '',
      meta: { aiSdk: meta },
      receivedAt: Date.now(),
    };
    await core.append(capsule, entry);
  };

  const send = guarded(async (c, capsule, principal) => {
    if (!isJson(c.req.header('content-type')))
      throw new AiSdkError('unsupported_media_type', 'the body must be application/json');
    let json: unknown;
    try {
      json = JSON.parse(await c.req.text());
    } catch {
      throw new AiSdkError('invalid_json', 'the body is not valid JSON');
    }
    const request = parseSendBody(json);
    const contextId = ownerContext(principal, request.chatId);
    const projector = await readChat(core, capsule, new ChatProjector(contextId));
    // The capsule's conversation cannot be rewound: an edited message is a new one to the client only.
    if (projector.hasUserMessage(request.userMessageId))
      throw new AiSdkError(
        'message_exists',
        'this message was sent already; send edits as a new message (a capsule keeps its own conversation)',
      );
    const assistantMessageId = `msg-${randomUUID()}`;
    const messageId = randomUUID();
    const meta: AiSdkMeta = {
      op: 'message',
      userMessageId: request.userMessageId,
      assistantMessageId,
      chatId: request.chatId,
    };
    const result = await core.submit(capsule, {
      text: request.text,
      contextId,
      messageId,
      record: { protocol: 'ai-sdk', owner: principal.owner, meta: { aiSdk: meta } },
      queue: true,
    });
    const refused = refusal(result.outcome);
    if (refused !== null) await recordRefusal(capsule, principal, contextId, messageId, refused);
    await readChat(core, capsule, projector);
    const turn = projector.turnOf(assistantMessageId);
    if (!turn)
      throw new AiSdkError('unavailable', 'the message was not recorded, retry', { 'retry-after': '1' });
    return streamTurn(c, deps, capsule, projector, turn);
  });

  const resume = guarded(async (c, capsule, principal) => {
    const projector = await readChat(core, capsule, new ChatProjector(contextOf(c, principal)));
    const turn = projector.activeTurn();
    if (!turn) return new Response(null, { status: 204 });
    return streamTurn(c, deps, capsule, projector, turn);
  });

  const history = guarded(async (c, capsule, principal) => {
    const projector = await readChat(core, capsule, new ChatProjector(contextOf(c, principal)));
    return new Response(JSON.stringify(projector.messages()), { headers: JSON_HEADERS });
  });

  const stop = guarded(async (c, capsule, principal) => {
    const contextId = contextOf(c, principal);
    const projector = await readChat(core, capsule, new ChatProjector(contextId));
    // Queued and running messages of the chat, on whichever replica owns the capsule's queue.
    const withdrawn = await core.withdrawContext(capsule, contextId, 'aborted', 'stopped');
    let stopped = withdrawn > 0;
    let unreachable = false;
    // A task the queue did not hand over (sent at once, or by another surface) is canceled here.
    for (const taskId of projector.runningTasks()) {
      const outcome = await core.cancel(capsule, taskId);
      if (outcome.kind === 'canceled') stopped = true;
      if (outcome.kind === 'unreachable') unreachable = true;
    }
    if (!stopped && unreachable) throw fromCoreError('upstream_unreachable');
    return new Response(JSON.stringify({ stopped }), { headers: JSON_HEADERS });
  });

  const refuse = (allow: string) => guarded(async () => Promise.reject(methodNotAllowed(allow)));
  const tooLarge = (): Response =>
    errorResponse(new AiSdkError('payload_too_large', 'request body too large'));

  const app = new Hono();
  app.post(CHAT, bodyLimit({ maxSize: config.bodyLimitBytes, onError: tooLarge }), send);
  app.all(CHAT, refuse('POST'));
  app.get(`${CHAT}/:chatId/stream`, resume);
  app.all(`${CHAT}/:chatId/stream`, refuse('GET'));
  app.get(`${CHAT}/:chatId/messages`, history);
  app.all(`${CHAT}/:chatId/messages`, refuse('GET'));
  app.post(`${CHAT}/:chatId/stop`, stop);
  app.all(`${CHAT}/:chatId/stop`, refuse('POST'));
  app.all('/ai-sdk/*', () =>
    errorResponse(new AiSdkError('not_found', 'no such route (the chat API is /ai-sdk/{capsule}/chat)')),
  );
  return app;
};
