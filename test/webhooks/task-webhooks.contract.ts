/**
 * The TaskWebhookStore contract, run against both stores: a compare-and-set of each task's
 * document (a stale version is refused), the owner's share of tasks (a create past it is refused, a
 * delete frees it), and the keys a deliverer's sweep walks.
 */
import { describe, expect, it } from 'vitest';
import {
  capsuleOfKey,
  taskWebhooksKey,
  type TaskWebhookStore,
  type TaskWebhooksDoc,
} from '../../src/webhooks/task-webhooks.js';

const docOf = (capsule: string, taskId: string, owner: string | null, cursor = 0): TaskWebhooksDoc => ({
  capsule,
  owner,
  taskId,
  logContext: `ctx-${taskId}`,
  createdAt: 1,
  webhooks: [
    {
      id: 'c1',
      url: 'http://127.0.0.1:9/hook',
      token: 'tok',
      authentication: null,
      wire: '1.0',
      cursor,
      done: false,
    },
  ],
});

export const runTaskWebhookStoreContract = (
  name: string,
  factory: () => TaskWebhookStore | Promise<TaskWebhookStore>,
  skip = false,
): void => {
  describe.skipIf(skip)(`TaskWebhookStore contract (${name})`, () => {
    it('writes by compare-and-set: a stale version is refused and changes nothing', async () => {
      const store = await factory();
      const key = taskWebhooksKey('cap.1', 't-1');
      expect(capsuleOfKey(key)).toBe('cap.1');
      expect(await store.get(key)).toBeNull();
      expect(await store.put(key, 0, docOf('cap.1', 't-1', 'o-a'), 10)).toEqual({
        kind: 'written',
        version: 1,
      });
      expect(await store.put(key, 0, docOf('cap.1', 't-1', 'o-a', 5), 10)).toEqual({ kind: 'moved' });
      expect(await store.put(key, 1, docOf('cap.1', 't-1', 'o-a', 7), 10)).toEqual({
        kind: 'written',
        version: 2,
      });
      expect(await store.put(key, 1, docOf('cap.1', 't-1', 'o-a', 9), 10)).toEqual({ kind: 'moved' });
      expect(await store.get(key)).toEqual({ doc: docOf('cap.1', 't-1', 'o-a', 7), version: 2 });
      expect(await store.keys()).toEqual([key]);
      expect(await store.put(key, 2, null, 10)).toEqual({ kind: 'written', version: 0 });
      expect(await store.get(key)).toBeNull();
      expect(await store.keys()).toEqual([]);
    });

    it("bounds each owner's tasks: a create past the share is refused, a delete frees it", async () => {
      const store = await factory();
      const k = (t: string) => taskWebhooksKey('cap', t);
      expect((await store.put(k('a1'), 0, docOf('cap', 'a1', 'o-a'), 2)).kind).toBe('written');
      expect((await store.put(k('a2'), 0, docOf('cap', 'a2', 'o-a'), 2)).kind).toBe('written');
      expect(await store.put(k('a3'), 0, docOf('cap', 'a3', 'o-a'), 2)).toEqual({ kind: 'owner_full' });
      expect(await store.get(k('a3'))).toBeNull();
      // Another owner (and no owner) has its own share; an update is no create.
      expect((await store.put(k('b1'), 0, docOf('cap', 'b1', 'o-b'), 2)).kind).toBe('written');
      expect((await store.put(k('n1'), 0, docOf('cap', 'n1', null), 2)).kind).toBe('written');
      expect((await store.put(k('a2'), 1, docOf('cap', 'a2', 'o-a', 3), 2)).kind).toBe('written');
      expect((await store.put(k('a1'), 1, null, 2)).kind).toBe('written');
      expect((await store.put(k('a3'), 0, docOf('cap', 'a3', 'o-a'), 2)).kind).toBe('written');
      expect((await store.keys()).sort()).toEqual([k('a2'), k('a3'), k('b1'), k('n1')].sort());
    });
  });
};
