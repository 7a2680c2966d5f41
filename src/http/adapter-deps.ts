/** What every adapter's `create<Proto>Routes(deps)` receives from the assembly in `src/http/app.ts`. */
import type { Logger } from 'pino';
import type { GatewayCore } from '../core/types.js';
import type { StreamStore } from '../streams/types.js';
import type { Subscriptions } from '../subscriptions/manager.js';
import type { ReceiverPolicy } from '../webhooks/receiver-url.js';
import type { TaskWebhookStore } from '../webhooks/task-webhooks.js';

/** What A2A push notifications need (config `a2a.pushNotifications`). */
export interface A2aPushDeps {
  /** Each task's configs and delivery cursors (memory, or Redis shared by the fleet). */
  store: TaskWebhookStore;
  /** Whether this replica owns (ingests) the capsule now: only its owner delivers its tasks' events. */
  owns(capsule: string): boolean;
  receivers: ReceiverPolicy;
  maxConfigsPerTask: number;
  maxTasksPerOwner: number;
  /** How long a receiver may take to answer one delivery. */
  timeoutMs: number;
  /** Each replica looks for tasks of its capsules to deliver this often. */
  sweepMs: number;
  /** The first retry's wait (then doubling to 60 s, ±20 %). */
  retryFirstMs: number;
}

/**
 * The settings adapters read, each under its name in the config file (schema.ts): the first four
 * are `downstream.*`, then `server.*`, then whole groups.
 */
export interface AdapterConfig {
  /** Interval of SSE heartbeats / keepalive comments, from connection open (15 s by default). */
  heartbeatMs: number;
  /** Longest a long-poll is held (30 s by default). */
  longPollMaxMs: number;
  /** Flue SSE: an `upToDate` control event at least this often when idle (30 s by default). */
  idleControlMs: number;
  /** Records queued per live subscriber before it is ended as slow. */
  maxQueuedRecords: number;
  /** Largest request body accepted (1 MiB by default). */
  bodyLimitBytes: number;
  /** Base for absolute URLs the gateway returns; null = derive from the request. */
  publicUrl: string | null;
  /** `GET /v1/follow`: streams one connection may hold (256 when absent). */
  follow?: { maxStreams: number };
  /** The general Durable Streams surface; absent = off. */
  durableStreams?: {
    writable: boolean;
    maxMessageBytes: number;
    maxBodyBytes: number;
  };
  /** Who outgoing webhooks may call (receiver-url.ts); absent: nothing internal. */
  webhooks?: { allowLoopback: boolean; allowHosts: string[] };
}

export interface AdapterDeps {
  core: GatewayCore;
  config: AdapterConfig;
  logger: Logger;
  /** The general streams' store; absent when `durableStreams.writable` is off. */
  streams?: StreamStore;
  /** Subscriptions to the general streams (PROTOCOL.md §6–7); absent when they are off. */
  subscriptions?: Subscriptions;
  /** A2A push notifications; absent: not offered (the card says so, the methods answer -32003). */
  a2aPush?: A2aPushDeps;
}
