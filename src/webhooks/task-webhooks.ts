/**
 * The webhooks of one task (A2A push notification configs, spec §4.3.3): where each is sent, with
 * which credentials, and how far its receiver has acknowledged the task's events (a log offset).
 * One document per task in the gateway's store (memory or Redis), replaced whole by a
 * compare-and-set on its version, as subscriptions are: the replica that delivers (the capsule's
 * owner) moves cursors forward, a new owner after a failover continues from the last acknowledged
 * event, and a create past the owner's share of tasks is refused by the store itself.
 */
import type { DocPut, OwnedDocuments, VersionedDoc } from './owned-documents.js';

export interface TaskWebhook {
  /** The config id, unique within the task. */
  id: string;
  url: string;
  /** Sent as `X-A2A-Notification-Token` (null: none). */
  token: string | null;
  /** Sent as `Authorization: <scheme> <credentials>` (null: none). */
  authentication: { scheme: string; credentials: string } | null;
  /** The wire its events are rendered in, as the surface names it (A2A: `1.0` or `0.3`). */
  wire: string;
  /** Inclusive: every event up to this log offset is acknowledged (the next one sent is after it). */
  cursor: number;
  /** The task's terminal event is acknowledged: nothing more to send. */
  done: boolean;
}

export interface TaskWebhooksDoc {
  capsule: string;
  /** The owner's tag (`o-…`), or null without auth. */
  owner: string | null;
  taskId: string;
  /** Where the task's records are in the log (the owner-namespaced context). */
  logContext: string;
  /** ms since epoch. */
  createdAt: number;
  webhooks: TaskWebhook[];
}

export type VersionedTaskWebhooks = VersionedDoc<TaskWebhooksDoc>;
export type TaskWebhooksPut = DocPut;

/** Each task's webhooks as one owned document (`maxPerOwner`: tasks with webhooks). */
export type TaskWebhookStore = OwnedDocuments<TaskWebhooksDoc>;

/** The store key of a task's webhooks; it starts with the capsule, so a sweep picks its own without a read. */
export const taskWebhooksKey = (capsule: string, taskId: string): string => `${capsule}|${taskId}`;

/** The capsule a key belongs to. */
export const capsuleOfKey = (key: string): string => key.slice(0, key.indexOf('|'));
