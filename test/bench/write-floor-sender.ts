/**
 * The write-floor bench's sender (write-floor.ts), forked onto the server core: accepts the reader's
 * connections, then writes one 200-byte chunk to each of them `rate` times a second, awaiting a
 * Redis PING before each round when given a port. Reports its own CPU per write over the window.
 * No gateway code runs here: this is what a write costs any Node server on this machine.
 */
import net from 'node:net';
import { Redis } from 'ioredis';
import { CLIENT_CORE, spawnPinned, stopProcess } from './fanout-procs.js';

interface Run {
  type: 'run';
  reader: string;
  connections: number;
  rate: number;
  warmMs: number;
  windowMs: number;
  redisPort: number | null;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const run = async (o: Run): Promise<{ usPerWrite: number; rounds: number }> => {
  const sockets: net.Socket[] = [];
  const server = net.createServer((s) => {
    s.setNoDelay(true);
    sockets.push(s);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as net.AddressInfo;
  const reader = spawnPinned(CLIENT_CORE, o.reader, [String(port), String(o.connections)], {
    stdio: 'inherit',
  });
  const redis = o.redisPort ? new Redis({ port: o.redisPort, host: '127.0.0.1' }) : null;
  try {
    for (let i = 0; sockets.length < o.connections; i++) {
      if (i > 1000) throw new Error(`${sockets.length} of ${o.connections} reader connections`);
      await sleep(10);
    }
    await redis?.ping();
    const chunk = Buffer.alloc(200, 'x');
    const start = performance.now();
    let next = start;
    let rounds = 0;
    let from: { cpu: NodeJS.CpuUsage; rounds: number } | null = null;
    // Paced like the simulated capsule: rounds at fixed times, not back to back.
    for (;;) {
      const now = performance.now();
      if (!from && now - start >= o.warmMs) from = { cpu: process.cpuUsage(), rounds };
      if (now - start >= o.warmMs + o.windowMs) break;
      next += 1000 / o.rate;
      const wait = next - performance.now();
      if (wait > 0) await sleep(wait);
      if (redis) await redis.ping();
      for (const s of sockets) s.write(chunk);
      rounds++;
    }
    const cpu = process.cpuUsage(from!.cpu);
    const writes = (rounds - from!.rounds) * o.connections;
    return { usPerWrite: (cpu.user + cpu.system) / writes, rounds: rounds - from!.rounds };
  } finally {
    redis?.disconnect();
    for (const s of sockets) s.destroy();
    server.close();
    await stopProcess(reader, 1000);
  }
};

process.on('message', (m: Run | { type: 'stop' }) => {
  if (m.type === 'stop') process.exit(0);
  run(m).then(
    (r) => process.send!({ type: 'done', ...r }),
    (err: unknown) => process.send!({ type: 'error', error: (err as Error).message }),
  );
});
