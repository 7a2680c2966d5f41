/**
 * Child process of the capsules bench (scale-capsules.ts): N idle capsules behind one real HTTP
 * server, capsule i at `/c<i>/`. A `stream/watch` POST is answered as a capsule does (200
 * text/event-stream, `connection-ack`, then `:heartbeat` comments every 15 s from one timer for all
 * watches); any other JSON-RPC call gets method-not-found. Lighter than N simulators, and the
 * gateway cannot tell: it sees the door's wire format. Driven over IPC: start → ready {url}, count.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const ACK = 'event: connection-ack\ndata: {"role":"observer","conversation_mode":"stateless"}\n\n';
const watches = new Set<http.ServerResponse>();
let total = 0;

const server = http.createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (c: string) => (body += c));
  req.on('end', () => {
    if (req.method === 'POST' && body.includes('"stream/watch"')) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write(ACK);
      watches.add(res);
      total++;
      res.on('close', () => watches.delete(res));
      return;
    }
    let id: unknown = null;
    try {
      id = (JSON.parse(body) as { id?: unknown }).id ?? null;
    } catch {
      // not JSON: answered with id null
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ jsonrpc: '2.0', id, error: { code: -32601, message: 'Method not found' } }));
  });
});
server.keepAliveTimeout = 60_000;

const heartbeat = setInterval(() => {
  for (const res of watches) res.write(':heartbeat\n\n');
}, 15_000);
heartbeat.unref();

process.on('message', (msg: { type: string }) => {
  if (msg.type === 'start') {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      process.send?.({ type: 'ready', url: `http://127.0.0.1:${port}` });
    });
  } else if (msg.type === 'count') {
    process.send?.({ type: 'count', open: watches.size, total });
  } else if (msg.type === 'stop') {
    for (const res of watches) res.destroy();
    process.exit(0);
  }
});
process.on('disconnect', () => process.exit(0));
