/**
 * A GatewayCore whose read side is a real Hub over one capsule; everything else throws. For route
 * tests (long-poll, records) that exercise reads only.
 */
import type { GatewayCore } from '../../../src/core/types.js';
import type { Hub } from '../../../src/hub/hub.js';

export const standInCore = (hub: Hub, shutdown: AbortSignal, capsule: string): GatewayCore => {
  const unused = (): never => {
    throw new Error('not used by a read-only route');
  };
  return {
    capsuleIds: () => [capsule],
    hasCapsule: (id) => id === capsule,
    conversationMode: () => 'stateless',
    position: (c) => hub.position(c),
    cursorStatus: (c, after) => hub.cursorStatus(c, after),
    read: (c, after, limit) => hub.read(c, after, limit),
    readContext: (c, context, after, limit) => hub.readContext(c, context, after, limit),
    contextFirst: (c, context) => hub.contextFirst(c, context),
    waitAfter: (c, after, limit, timeoutMs, signal) => hub.waitAfter(c, after, limit, timeoutMs, signal),
    subscribe: (c, options) => hub.subscribe(c, options),
    submit: unused,
    cancel: unused,
    withdrawContext: unused,
    forwardRpc: unused,
    append: unused,
    status: unused,
    statuses: unused,
    claimOnce: unused,
    shutdownSignal: shutdown,
  };
};
