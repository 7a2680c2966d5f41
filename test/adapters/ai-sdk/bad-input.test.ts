/**
 * Every bad input to the AI SDK surface gets its exact JSON answer, and nothing reaches the log or
 * the queue: no message, bad JSON, a bad body, an unknown capsule, a bad chat id (`.`, `..`, control
 * characters, too long), an oversized body, a wrong method or route, a missing or foreign credential,
 * and a full queue (429 with Retry-After).
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userMessage, startChatRig, history, until, type ChatRig } from './rig.js';
import { gatewayChat } from './node-chat.js';

const KEY_ALICE = 'alice-key-0123456789abcdef';
const KEY_BOB = 'bob-key-0123456789abcdef';
const sha = (k: string) => createHash('sha256').update(k).digest('hex');
const ALICE = { authorization: `Bearer ${KEY_ALICE}` };
const BOB = { authorization: `Bearer ${KEY_BOB}` };

let r: ChatRig;
beforeAll(async () => {
  r = await startChatRig({
    config: {
      bodyLimitBytes: 4096,
      apiKeys: [
        { sha256: sha(KEY_ALICE), owner: 'alice' },
        { sha256: sha(KEY_BOB), owner: 'bob' },
      ],
    },
    extra: { queue: { maxPerCapsule: 1000, maxPerOwner: 1, retryAfterMs: 7000 } },
  });
});
afterAll(() => r.close());

/** The submissions in the capsule's log (what a bad request must not add). */
const submissions = async (): Promise<number> => {
  const { records } = await r.gw.core.read(r.capsule, 0, 10_000);
  return records.filter((x) => x.kind === 'submission').length;
};

/** A request with its path sent exactly as written (fetch would resolve `%2E%2E` segments). */
const raw = (method: string, path: string, headers: Record<string, string> = ALICE, body?: string) =>
  new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
    const url = new URL(r.gw.baseUrl);
    const req = http.request({ host: url.hostname, port: url.port, method, path, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });

const post = (
  body: string,
  headers: Record<string, string> = { ...ALICE, 'content-type': 'application/json' },
) => raw('POST', `/ai-sdk/${r.capsule}/chat`, headers, body);

const err = (code: string, message: string) => JSON.stringify({ error: { code, message } });

const send = (id: unknown, messages: unknown, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ id, messages, trigger: 'submit-message', ...extra });

describe('bad input to the AI SDK surface', () => {
  const cases: [string, () => Promise<{ status: number; body: string }>, number, string][] = [
    [
      'no message',
      () => post(send('c', [])),
      400,
      err('no_user_message', 'the body holds no message to send'),
    ],
    [
      'no messages at all',
      () => post(JSON.stringify({ id: 'c' })),
      400,
      err('no_user_message', 'the body holds no message to send'),
    ],
    [
      'the last message is not the user’s',
      () => post(send('c', [{ id: 'a', role: 'assistant', parts: [{ type: 'text', text: 'x' }] }])),
      400,
      err('no_user_message', 'the last message must be a user message'),
    ],
    [
      'a user message without text',
      () => post(send('c', [{ id: 'u', role: 'user', parts: [{ type: 'text', text: '  ' }] }])),
      400,
      err('no_user_message', 'the user message has no text'),
    ],
    ['unparseable JSON', () => post('{"id": '), 400, err('invalid_json', 'the body is not valid JSON')],
    ['a JSON array', () => post('[]'), 400, err('invalid_request', 'the body must be a JSON object')],
    [
      'no chat id',
      () => post(JSON.stringify({ messages: [userMessage('u', 'hi')] })),
      400,
      err('invalid_request', 'id: Invalid input: expected string, received undefined'),
    ],
    [
      'a message that is no UIMessage',
      () => post(send('c', [{ id: 'u', role: 'user' }])),
      400,
      err('invalid_request', 'message.parts: Invalid input: expected array, received undefined'),
    ],
    [
      'a file part',
      () =>
        post(
          send('c', [
            { id: 'u', role: 'user', parts: [{ type: 'file', url: 'data:,x', mediaType: 'text/plain' }] },
          ]),
        ),
      400,
      err('invalid_request', 'file parts are not supported: capsules take text only'),
    ],
    [
      'regenerate',
      () => post(send('c', [userMessage('u', 'hi')], { trigger: 'regenerate-message' })),
      400,
      err(
        'invalid_request',
        'regenerate is not supported: a capsule keeps its own conversation, which cannot be rewound',
      ),
    ],
    [
      'chat id ".."',
      () => post(send('..', [userMessage('u', 'hi')])),
      400,
      err('invalid_request', 'id must not be "." or ".."'),
    ],
    [
      'chat id with a control character',
      () => post(send('a\u0001b', [userMessage('u', 'hi')])),
      400,
      err('invalid_request', 'id must not contain control characters'),
    ],
    [
      'empty chat id',
      () => post(send('', [userMessage('u', 'hi')])),
      400,
      err('invalid_request', 'id must be 1 to 256 characters'),
    ],
    [
      'a message id with a control character',
      () => post(send('c', [userMessage('u\n', 'hi')])),
      400,
      err('invalid_request', 'message id must not contain control characters'),
    ],
    [
      'not JSON',
      () => post(send('c', [userMessage('u', 'hi')]), { ...ALICE, 'content-type': 'text/plain' }),
      415,
      err('unsupported_media_type', 'the body must be application/json'),
    ],
    [
      'an oversized body',
      () => post(send('c', [userMessage('u', 'x'.repeat(5000))])),
      413,
      err('payload_too_large', 'request body too large'),
    ],
    [
      'an unknown capsule',
      () =>
        raw(
          'POST',
          '/ai-sdk/no-such-capsule/chat',
          { ...ALICE, 'content-type': 'application/json' },
          send('c', [userMessage('u', 'hi')]),
        ),
      404,
      err('not_found', 'unknown capsule'),
    ],
    [
      'no credential',
      () => post(send('c', [userMessage('u', 'hi')]), { 'content-type': 'application/json' }),
      401,
      err('unauthorized', 'a valid credential is required (Authorization: Bearer …)'),
    ],
    // The URL parser resolves `%2E%2E` and `%2e` segments before routing: no chat route is left.
    [
      'resume of chat id ".."',
      () => raw('GET', `/ai-sdk/${capsuleRef()}/chat/%2E%2E/stream`),
      404,
      err('not_found', 'no such route (the chat API is /ai-sdk/{capsule}/chat)'),
    ],
    [
      'history of chat id "."',
      () => raw('GET', `/ai-sdk/${capsuleRef()}/chat/%2e/messages`),
      404,
      err('not_found', 'no such route (the chat API is /ai-sdk/{capsule}/chat)'),
    ],
    [
      'history of a chat id with a NUL',
      () => raw('GET', `/ai-sdk/${capsuleRef()}/chat/a%00b/messages`),
      400,
      err('invalid_request', 'chat id must not contain control characters'),
    ],
    [
      'stop of a too long chat id',
      () => raw('POST', `/ai-sdk/${capsuleRef()}/chat/${'x'.repeat(257)}/stop`),
      400,
      err('invalid_request', 'chat id must be 1 to 256 characters'),
    ],
    [
      'a chat id that does not percent-decode',
      () => raw('GET', `/ai-sdk/${capsuleRef()}/chat/%E0%A4%A/stream`),
      400,
      err('bad_request', 'malformed percent-encoding in the path'),
    ],
    [
      'resume of an unknown capsule',
      () => raw('GET', '/ai-sdk/nope/chat/c/stream'),
      404,
      err('not_found', 'unknown capsule'),
    ],
    [
      'GET on the send route',
      () => raw('GET', `/ai-sdk/${capsuleRef()}/chat`),
      405,
      err('method_not_allowed', 'method not allowed'),
    ],
    [
      'POST on the resume route',
      () => raw('POST', `/ai-sdk/${capsuleRef()}/chat/c/stream`),
      405,
      err('method_not_allowed', 'method not allowed'),
    ],
    [
      'an unknown route',
      () => raw('GET', `/ai-sdk/${capsuleRef()}/other`),
      404,
      err('not_found', 'no such route (the chat API is /ai-sdk/{capsule}/chat)'),
    ],
  ];
  const capsuleRef = () => r.capsule;

  it.each(cases)('%s', async (_name, request, status, body) => {
    const before = await submissions();
    const res = await request();
    expect({ status: res.status, body: res.body }).toEqual({ status, body });
    expect(await submissions()).toBe(before);
  });

  it('a wrong method names the allowed one', async () => {
    const res = await raw('PUT', `/ai-sdk/${r.capsule}/chat/c/stop`);
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe('POST');
  });

  it('one owner never sees another’s chat of the same id', async () => {
    const alice = gatewayChat(`${r.gw.baseUrl}/ai-sdk/${r.capsule}/chat`, 'shared-name', { headers: ALICE });
    await alice.sendMessage({ text: 'mine' });
    const api = `${r.gw.baseUrl}/ai-sdk/${r.capsule}/chat`;
    expect(await history(api, 'shared-name', ALICE)).toHaveLength(2);
    expect(await history(api, 'shared-name', BOB)).toEqual([]);
    expect(
      await fetch(`${api}/shared-name/stop`, { method: 'POST', headers: BOB }).then((x) => x.json()),
    ).toEqual({
      stopped: false,
    });
  });

  it('past the owner’s queue bound: 429 with Retry-After, nothing queued', async () => {
    const api = `${r.gw.baseUrl}/ai-sdk/${r.capsule}/chat`;
    const held = gatewayChat(api, 'bound-1', { headers: ALICE });
    const running = once(r.sim, 'run');
    const holding = held.sendMessage({ text: '#sim {"hold":true}' });
    await running;
    // The held task runs; one more waits in the queue (the bound is 1 per owner) …
    const waiting = gatewayChat(api, 'bound-2', { headers: ALICE });
    const waitingDone = waiting.sendMessage({ text: 'queued' });
    await until(async () => (await r.gw.core.status(r.capsule)).queue.depth === 1);
    // … so the next is refused.
    const before = await submissions();
    const res = await post(send('bound-3', [userMessage('u3', 'one too many')]));
    expect({ status: res.status, body: res.body, retry: res.headers['retry-after'] }).toEqual({
      status: 429,
      body: err('rate_limited', 'too many queued messages, retry later'),
      retry: '7',
    });
    expect(await submissions()).toBe(before);
    // Another owner's share is its own.
    const bob = await fetch(api, {
      method: 'POST',
      headers: { ...BOB, 'content-type': 'application/json' },
      body: send('bound-3', [userMessage('u3', 'bob')]),
    });
    expect(bob.status).toBe(200);
    await fetch(`${api}/bound-1/stop`, { method: 'POST', headers: ALICE });
    await Promise.all([holding, waitingDone, bob.text()]);
    expect(waiting.snapshot().messages.at(-1)!.parts.at(-1)).toMatchObject({ text: 'Echo: queued' });
  });
});
