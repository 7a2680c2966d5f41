/**
 * The push notification config methods (1.0 `CreateTaskPushNotificationConfig`, `Get…`,
 * `ListTaskPushNotificationConfigs`, `Delete…`; 0.3 `tasks/pushNotificationConfig/{set,get,list,
 * delete}`): on the caller's own tasks only (another owner's is -32001, as on every method). A
 * config set on a running task is sent the updates that follow; one on an ended task is refused.
 */
import type { GatewayCore } from '../../src/core/types.js';
import { taskWebhooksKey } from '../../src/webhooks/task-webhooks.js';
import { lookup, result, type Call } from './call.js';
import { A2aError, CODE } from './errors.js';
import { configNotFound, renderConfig, type PushConfigs } from './push-configs.js';
import type { PushDelivery } from './push-delivery.js';
import { parseConfigRef, parseCreate, parseListParams, urlField } from './push-params.js';

export interface PushMethods {
  create(call: Call): Promise<Response>;
  get(call: Call): Promise<Response>;
  list(call: Call): Promise<Response>;
  remove(call: Call): Promise<Response>;
}

export const pushMethods = (
  core: GatewayCore,
  configs: PushConfigs,
  delivery: PushDelivery,
): PushMethods => ({
  create: async (call) => {
    const { taskId, config } = parseCreate(call.params, call.dialect);
    configs.check(config, urlField(call.dialect, false));
    const { task, logContext } = await lookup(core, call, taskId);
    if (task.terminal)
      throw new A2aError(CODE.unsupportedOperation, 'the task has ended: it has no updates left to notify');
    // Its updates from now on: those after the fold's cursor.
    const hook = await configs.set(
      { capsule: call.capsule, owner: call.principal.owner, taskId, logContext },
      config,
      call.dialect,
      task.cursor,
    );
    void delivery.kick(taskWebhooksKey(call.capsule, taskId)).catch(() => undefined);
    return result(call, renderConfig(call.dialect, taskId, hook));
  },

  get: async (call) => {
    const ref = parseConfigRef(call.params, call.dialect, call.dialect === '1.0');
    await lookup(core, call, ref.taskId);
    const hooks = await configs.list(call.capsule, ref.taskId);
    // 0.3 without an id: the task's first config (the SDK's server answers its default-id one).
    const hook = ref.id === null ? hooks[0] : hooks.find((h) => h.id === ref.id);
    if (!hook) throw configNotFound();
    return result(call, renderConfig(call.dialect, ref.taskId, hook));
  },

  list: async (call) => {
    const { taskId } = parseListParams(call.params, call.dialect);
    await lookup(core, call, taskId);
    const rendered = (await configs.list(call.capsule, taskId)).map((h) =>
      renderConfig(call.dialect, taskId, h),
    );
    return result(call, call.dialect === '1.0' ? { configs: rendered, nextPageToken: '' } : rendered);
  },

  remove: async (call) => {
    const ref = parseConfigRef(call.params, call.dialect, true);
    await lookup(core, call, ref.taskId);
    await configs.remove(call.capsule, ref.taskId, ref.id!);
    // 1.0 answers google.protobuf.Empty, 0.3 null.
    return result(call, call.dialect === '1.0' ? {} : null);
  },
});
