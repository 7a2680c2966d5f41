// The standalone entry's argument parsing and the demo workload.
import { describe, expect, it } from 'vitest';
import { parseSimulateArgs } from '../../src/simulator/cli.js';
import { startWorkload } from '../../src/simulator/workload.js';
import { useSimulators } from './support.js';

const start = useSimulators();

describe('simulate arguments', () => {
  it('parses every flag', () => {
    const args = parseSimulateArgs(
      '--port 52222 --host 0.0.0.0 --heartbeat-ms 500 --mode threaded --acceptance queue --workload --seed 9'.split(
        ' ',
      ),
    );
    expect(args).toEqual({
      options: {
        port: 52222,
        host: '0.0.0.0',
        heartbeatMs: 500,
        conversationMode: 'threaded',
        taskAcceptance: 'queue',
      },
      workload: true,
      seed: 9,
    });
  });

  it('takes a release line and a door token', () => {
    expect(parseSimulateArgs(['--release', '0.5', '--door-token', 't0k']).options).toEqual({
      release: '0.5',
      doorToken: 't0k',
    });
  });

  it.each([
    [['--mode', 'chatty'], '--mode must be one of stateless|threaded, got chatty'],
    [['--release', '0.7'], '--release must be one of spec|0.4|0.5|0.6|1.0, got 0.7'],
    [['--acceptance'], '--acceptance must be one of none|single|queue, got nothing'],
    [['--port', 'x'], '--port needs a non-negative integer, got x'],
    [['--bogus'], 'unknown argument --bogus'],
  ])('%j → %s', (argv, message) => expect(() => parseSimulateArgs(argv)).toThrow(message));
});

describe('workload', () => {
  it('keeps submitting varied tasks until stopped', async () => {
    const c = await start();
    const kinds = new Set<string>();
    const enough = new Promise<void>((resolve) =>
      c.on('written', (w: { event: string }) => {
        kinds.add(w.event);
        if (kinds.has('thinking') && kinds.has('text') && kinds.has('status')) resolve();
      }),
    );
    const load = startWorkload(c, { seed: 3, pauseMs: 1 });
    await enough;
    load.stop();
    await c.idle();
    expect(c.written.length).toBeGreaterThan(0);
  });
});
