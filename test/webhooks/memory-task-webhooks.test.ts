/** The TaskWebhookStore contract on the embedded store. */
import { MemoryTaskWebhookStore } from '../../src/webhooks/memory-task-webhooks.js';
import { runTaskWebhookStoreContract } from './task-webhooks.contract.js';

runTaskWebhookStoreContract('memory', () => new MemoryTaskWebhookStore());
