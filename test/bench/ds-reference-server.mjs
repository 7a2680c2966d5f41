// The reference Durable Streams server (`@durable-streams/server`) as its README's Quick Start runs
// it: `new DurableStreamTestServer({ port, host })`, the in-memory store (the default; no
// `dataDir`), compression on (it compresses only for a client that sends Accept-Encoding, which the
// bench's does not). Plain JavaScript run by plain `node`, so no loader is billed to it.
// Usage: node ds-reference-server.mjs <port>
import { DurableStreamTestServer } from '@durable-streams/server';

const port = Number(process.argv[2]);
const server = new DurableStreamTestServer({ port, host: '127.0.0.1' });
await server.start();
const stop = () => server.stop().finally(() => process.exit(0));
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
