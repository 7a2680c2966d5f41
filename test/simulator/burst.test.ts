import { describe, expect, it } from 'vitest';
import { useSimulators } from './support.js';

describe('simulator bursts', () => {
  const start = useSimulators();

  it('a burst writes the same frames, in the same order, as a paced run of the same script', async () => {
    const paced = await start();
    const burst = await start();
    await paced.submit('#sim {"chunks":600,"thinking":3,"tools":2}', 'ctx_same').done;
    await burst.submit('#sim {"chunks":600,"thinking":3,"tools":2,"burst":true}', 'ctx_same').done;
    // Task ids differ per run; everything else (events, ids, data shape) must match.
    const shape = (c: typeof paced) =>
      c.written.map((f) => [f.event, f.id, f.data.replace(/tsk_[0-9a-f]+/, 'tsk')]);
    expect(burst.written.length).toBe(paced.written.length);
    expect(shape(burst)).toEqual(shape(paced));
  });
});
