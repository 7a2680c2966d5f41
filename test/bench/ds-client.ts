/**
 * The Durable Streams bench's client (streams.ts): plain `node:http` with keep-alive, the same
 * requests to every server. No Accept-Encoding is sent (the reference server would gzip its reads
 * for a client that asks; the gateway never does), no body is parsed: a read's messages are counted
 * from its bytes, which the fixed message size makes exact (messageCount). Every loop is bounded by
 * a count.
 */
import { Agent, request } from 'node:http';

export type DsMode = 'json' | 'bytes';

export const CONTENT_TYPE: Record<DsMode, string> = {
  json: 'application/json',
  bytes: 'application/octet-stream',
};

/**
 * Message `i`, exactly `size` bytes: a JSON object `{"i":"<seq>","p":"xxx…"}` (valid JSON alone or
 * as an array element), or the same bytes on a bytes stream.
 */
export const message = (i: number, size: number): Buffer => {
  const head = `{"i":"${String(i).padStart(10, '0')}","p":"`;
  const pad = size - head.length - 2;
  if (pad < 0) throw new Error(`a message of ${size} bytes cannot hold its header`);
  return Buffer.from(`${head}${'x'.repeat(pad)}"}`);
};

/**
 * Messages in one read's body of `bytes` bytes: a bytes stream's body is the messages end to end; a
 * JSON stream's is `[m,m,…,m]` (each message plus a comma or a bracket). Throws when the body is not
 * whole messages: the bench counts only what it can check.
 */
export const messageCount = (mode: DsMode, bytes: number, size: number): number => {
  if (mode === 'bytes') {
    if (bytes % size !== 0) throw new Error(`a read of ${bytes} bytes is not whole ${size}-byte messages`);
    return bytes / size;
  }
  // `[]` is 2 bytes for no message; k messages: k × (size + 1) + 1.
  if (bytes === 2) return 0;
  if ((bytes - 1) % (size + 1) !== 0) throw new Error(`a JSON read of ${bytes} bytes is not whole messages`);
  return (bytes - 1) / (size + 1);
};

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Body bytes received (the body itself is dropped). */
  bytes: number;
  body: string;
}

/** Sockets are kept for the next request; one per concurrent caller. */
export const keepAliveAgent = (sockets: number): Agent =>
  new Agent({ keepAlive: true, maxSockets: sockets, maxFreeSockets: sockets });

/**
 * One request. The body is counted, not kept (an error's first bytes are kept, for its message).
 */
export const call = (
  agent: Agent,
  method: string,
  url: string,
  headers: Record<string, string> = {},
  body?: Buffer,
): Promise<Answer> =>
  new Promise((resolve, reject) => {
    const req = request(url, { method, agent, headers }, (res) => {
      let bytes = 0;
      let text = '';
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if ((res.statusCode ?? 0) >= 300 && text.length < 500) text += chunk.toString('utf8');
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, bytes, body: text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });

const expect = (a: Answer, ok: number[], what: string): Answer => {
  if (!ok.includes(a.status)) throw new Error(`${what}: ${a.status} ${a.body.slice(0, 200)}`);
  return a;
};

/**
 * 503s answered so far (the gateway's store did not answer within its deadline): each is retried
 * after its Retry-After, as a client does, and counted; the bench reads and resets the count.
 */
export const unavailable = { count: 0 };
const MAX_RETRIES = 10;

/** `call`, retrying a 503 after its Retry-After (at most MAX_RETRIES times). */
const send = async (
  agent: Agent,
  method: string,
  url: string,
  headers: Record<string, string> = {},
  body?: Buffer,
): Promise<Answer> => {
  for (let attempt = 0; ; attempt++) {
    const a = await call(agent, method, url, headers, body);
    if (a.status !== 503 || attempt === MAX_RETRIES) return a;
    unavailable.count++;
    const wait = Number(a.headers['retry-after']);
    await new Promise((r) => setTimeout(r, (Number.isFinite(wait) && wait > 0 ? wait : 1) * 1000));
  }
};

export const createStream = async (agent: Agent, url: string, mode: DsMode): Promise<void> => {
  expect(
    await call(agent, 'PUT', url, { 'content-type': CONTENT_TYPE[mode], 'content-length': '0' }),
    [201],
    `PUT ${url}`,
  );
};

/**
 * `count` messages appended in batches (setup for the reads, not measured): JSON batches of 100 in
 * one array; a bytes stream's message is a whole POST, so one POST each, 16 at a time.
 */
export const fillStream = async (
  agent: Agent,
  url: string,
  mode: DsMode,
  count: number,
  size: number,
): Promise<void> => {
  if (mode === 'json') {
    await appendBatches(agent, url, 0, count, size, 100);
    return;
  }
  await appendMessages(agent, url, mode, 0, count, size, 16);
};

/**
 * `count` appends of one message each, `inFlight` at a time (1: each POST waits for the last's
 * answer), on `inFlight` keep-alive connections. No Stream-Seq and no producer headers: concurrent
 * appends are ordered as the server receives them, which the protocol allows.
 */
export const appendMessages = async (
  agent: Agent,
  url: string,
  mode: DsMode,
  first: number,
  count: number,
  size: number,
  inFlight: number,
): Promise<void> => {
  const headers = { 'content-type': CONTENT_TYPE[mode] };
  let next = first;
  const end = first + count;
  const lane = async (): Promise<void> => {
    while (next < end) {
      const i = next++;
      expect(await send(agent, 'POST', url, headers, message(i, size)), [200, 204], `POST ${url}`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, count) }, lane));
};

/**
 * `count` messages appended as JSON arrays of `batch` messages, one POST at a time: a producer that
 * batches, as the reference client's IdempotentProducer does (JSON mode only: a bytes stream's
 * message is a whole POST).
 */
export const appendBatches = async (
  agent: Agent,
  url: string,
  first: number,
  count: number,
  size: number,
  batch: number,
): Promise<void> => {
  const headers = { 'content-type': CONTENT_TYPE.json };
  for (let i = first; i < first + count; i += batch) {
    const n = Math.min(batch, first + count - i);
    expect(await send(agent, 'POST', url, headers, jsonArray(i, n, size)), [200, 204], `POST ${url}`);
  }
};

/** Messages first..first+n-1 as one JSON array. */
export const jsonArray = (first: number, n: number, size: number): Buffer => {
  const parts: Buffer[] = [Buffer.from('[')];
  for (let k = 0; k < n; k++) {
    if (k > 0) parts.push(Buffer.from(','));
    parts.push(message(first + k, size));
  }
  parts.push(Buffer.from(']'));
  return Buffer.concat(parts);
};

/**
 * One catch-up: from `offset=-1`, each read continuing at its `Stream-Next-Offset`, until a read says
 * `Stream-Up-To-Date`. Returns the messages and bytes received; a bounded number of reads.
 */
export const catchUp = async (
  agent: Agent,
  url: string,
  mode: DsMode,
  size: number,
  maxReads: number,
): Promise<{ messages: number; bytes: number; reads: number }> => {
  let offset = '-1';
  let messages = 0;
  let bytes = 0;
  for (let reads = 1; reads <= maxReads; reads++) {
    const a = expect(
      await send(agent, 'GET', `${url}?offset=${encodeURIComponent(offset)}`),
      [200],
      `GET ${url}`,
    );
    messages += messageCount(mode, a.bytes, size);
    bytes += a.bytes;
    const next = a.headers['stream-next-offset'];
    if (typeof next !== 'string') throw new Error(`GET ${url}: no Stream-Next-Offset`);
    if (a.headers['stream-up-to-date'] === 'true') return { messages, bytes, reads };
    if (next === offset) throw new Error(`GET ${url}: no progress at ${offset}`);
    offset = next;
  }
  throw new Error(`GET ${url}: not up to date after ${maxReads} reads`);
};
