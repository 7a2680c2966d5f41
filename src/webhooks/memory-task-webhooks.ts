/** Task webhooks in process memory (the embedded store): nothing survives a restart. */
import { MemoryOwnedDocuments } from './owned-documents.js';
import type { TaskWebhookStore, TaskWebhooksDoc } from './task-webhooks.js';

export class MemoryTaskWebhookStore
  extends MemoryOwnedDocuments<TaskWebhooksDoc>
  implements TaskWebhookStore {}
