/**
 * Task webhooks on Redis: owned documents (owned-documents.ts: a hash per task replaced by one
 * compare-and-set, so a cursor moves in one step and a replica that read an older version is
 * refused; the per-owner bound exact in one slot).
 */
import type { Cluster, Redis } from 'ioredis';
import { RedisOwnedDocuments } from './owned-documents.js';
import type { TaskWebhookStore, TaskWebhooksDoc } from './task-webhooks.js';

export class RedisTaskWebhookStore extends RedisOwnedDocuments<TaskWebhooksDoc> implements TaskWebhookStore {
  constructor(client: Redis | Cluster, keyPrefix = 'mg:a2a') {
    super(client, `${keyPrefix}:{push}`);
  }
}
