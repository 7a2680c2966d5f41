/**
 * `/a2a/{capsule}/`: the agent card and the JSON-RPC door (notes a2a-and-webhooks.md A1–A5): who may
 * call, the request's shape and `A2A-Version`, then the method (task-methods.ts, task-stream.ts,
 * push-methods.ts). Every read is a fold of the log, so any replica answers for any task.
 */
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { may, principalOf, seesCapsule, type Principal } from '../../src/auth/principal.js';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import { countUnexpected } from '../../src/http/unexpected-errors.js';
import { json, record, type Call } from './call.js';
import { agentCard, interfaceUrl } from './card.js';
import { dialectOf, operationOf, Renderer, type Operation } from './dialect.js';
import {
  A2aError,
  CODE,
  capsuleNotFound,
  errorResponse,
  fromCoreError,
  invalidParams,
  pushNotSupported,
  type RpcId,
} from './errors.js';
import { PushConfigs } from './push-configs.js';
import { PushDelivery } from './push-delivery.js';
import { pushMethods } from './push-methods.js';
import { taskMethods } from './task-methods.js';
import { taskStreams } from './task-stream.js';

const CARD = '/a2a/:capsule/.well-known/agent-card.json';
const RPC = '/a2a/:capsule/';

const isJson = (contentType: string | undefined): boolean => {
  const t = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  return t === 'application/json' || t === 'application/a2a+json';
};

export const createRoutes = (deps: AdapterDeps): Hono => {
  const { core, config, logger } = deps;
  const app = new Hono();
  // Push notifications: the configs, and this replica's deliverer of its capsules' tasks.
  let push: { configs: PushConfigs; delivery: PushDelivery } | null = null;
  if (deps.a2aPush) {
    const delivery = new PushDelivery(core, deps.a2aPush, logger.child({ room: 'a2a-push' }));
    delivery.start();
    push = { configs: new PushConfigs(deps.a2aPush), delivery };
  }
  const streams = taskStreams(deps);
  const tasks = taskMethods(deps, streams, push);
  const pushCalls = push ? pushMethods(core, push.configs, push.delivery) : null;

  /** Who may call: authenticated, the capsule visible, `submit` on it (else refused as not there). */
  const admit = (c: Context, capsule: string): Principal => {
    const principal = principalOf(c);
    if (principal.kind === 'anonymous')
      throw new A2aError(CODE.server, 'a valid credential is required (Authorization: Bearer …)', 401);
    if (!core.hasCapsule(capsule) || !seesCapsule(principal, capsule)) throw capsuleNotFound();
    if (!may(principal, 'submit', capsule))
      throw new A2aError(CODE.server, 'this credential lacks the "submit" scope', 403);
    return principal;
  };

  const failure = (err: unknown, c: Context): A2aError => {
    if (err instanceof A2aError) return err;
    const e = fromCoreError(err);
    if (e.code === CODE.internal && e.status === 200) {
      countUnexpected('request');
      logger.error({ err, path: c.req.path }, 'a2a: unhandled error');
    }
    return e;
  };

  app.get(CARD, async (c) => {
    try {
      const capsule = c.req.param('capsule');
      admit(c, capsule);
      const url = interfaceUrl(c.req.url, config.publicUrl, capsule);
      return json(await agentCard(core, capsule, url, push !== null));
    } catch (err) {
      return errorResponse(null, failure(err, c));
    }
  });
  app.all(CARD, () =>
    errorResponse(null, new A2aError(CODE.invalidRequest, 'method not allowed', 405, { allow: 'GET' })),
  );

  const tooLarge = (): Response =>
    errorResponse(null, new A2aError(CODE.invalidRequest, 'request body too large', 413));

  app.post(
    RPC,
    bodyLimit({ maxSize: config.bodyLimitBytes, onError: () => Promise.resolve(tooLarge()) }),
    async (c) => {
      let id: RpcId = null;
      try {
        const capsule = c.req.param('capsule');
        const principal = admit(c, capsule);
        if (!isJson(c.req.header('content-type')))
          throw new A2aError(CODE.invalidRequest, 'Content-Type must be application/json', 415);
        let body: unknown;
        try {
          body = JSON.parse(await c.req.text());
        } catch {
          throw new A2aError(CODE.parse, 'Parse error');
        }
        const req = record(body);
        if (req && (typeof req.id === 'string' || typeof req.id === 'number')) id = req.id;
        if (!req || req.jsonrpc !== '2.0' || typeof req.method !== 'string' || id === null)
          throw new A2aError(CODE.invalidRequest, 'Invalid Request');
        const dialect = dialectOf(c.req.header('a2a-version'));
        if (dialect === null)
          throw new A2aError(
            CODE.versionNotSupported,
            'A2A-Version not supported: this interface offers 1.0 and 0.3',
          );
        const op = operationOf(dialect, req.method);
        if (op === null) throw new A2aError(CODE.methodNotFound, 'Method not found');
        const params = req.params === undefined ? {} : record(req.params);
        if (!params) throw invalidParams('params must be an object');
        const call: Call = {
          capsule,
          principal,
          dialect,
          render: new Renderer(dialect),
          id,
          params,
          lastEventId: c.req.header('last-event-id'),
        };
        return await dispatch(op, call);
      } catch (err) {
        return errorResponse(id, failure(err, c));
      }
    },
  );
  app.all(RPC, () =>
    errorResponse(null, new A2aError(CODE.invalidRequest, 'method not allowed', 405, { allow: 'POST' })),
  );

  const pushCall = (method: keyof NonNullable<typeof pushCalls>, call: Call): Promise<Response> =>
    pushCalls ? pushCalls[method](call) : Promise.reject(pushNotSupported());

  const dispatch = (op: Operation, call: Call): Promise<Response> => {
    switch (op) {
      case 'SendMessage':
        return tasks.send(call, false);
      case 'SendStreamingMessage':
        return tasks.send(call, true);
      case 'GetTask':
        return tasks.getTask(call);
      case 'ListTasks':
        return tasks.listTasks(call);
      case 'CancelTask':
        return tasks.cancelTask(call);
      case 'SubscribeToTask':
        return streams.subscribe(call);
      case 'CreateTaskPushNotificationConfig':
        return pushCall('create', call);
      case 'GetTaskPushNotificationConfig':
        return pushCall('get', call);
      case 'ListTaskPushNotificationConfigs':
        return pushCall('list', call);
      case 'DeleteTaskPushNotificationConfig':
        return pushCall('remove', call);
      case 'GetExtendedAgentCard':
        return Promise.reject(
          new A2aError(CODE.extendedAgentCardNotConfigured, 'Extended agent card is not configured'),
        );
    }
  };

  return app;
};
