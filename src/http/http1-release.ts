/**
 * Letting go of Node's HTTP/1.1 machinery under a live SSE response. Once the head is out, an SSE
 * connection is a socket we write to until it closes: nothing more is parsed from it and nothing
 * goes through the ServerResponse. Node's server still keeps, per connection, its HTTP parser (a C++
 * object of about 2 KB, in the server's connection list), eight listeners bound to a per-connection
 * state object, three wrappers of the socket's own methods and the response's 'finish' hook; the
 * idle-follower bench measured about 6 KB per connection for them (docs/benchmarks.md). Node lets
 * go of them itself when a connection is upgraded (`server.on('upgrade')`); this does the same for
 * a response that will never finish:
 *
 * - the parser is returned to Node's pool (`freeParser` of `_http_common`, as Node's own upgrade
 *   path does), and the server's listeners leave the socket;
 * - the response is detached from its socket; its 'close' is still emitted when the socket closes
 *   (the gateway's connection gauge, open-request caps and the Hono request's abort hang on it), and
 *   the socket still reads, so a client's FIN ends our side as Node's server would
 *   (`httpAllowHalfOpen` false);
 * - the server's `closeAllConnections()` no longer sees the socket (it walks the parsers), so
 *   `destroyReleased(server)` cuts these at a drain's end.
 *
 * Node's listeners are found by name (lib/_http_server.js); on a Node whose server looks otherwise
 * nothing is changed and the response stays as it was (test/http/sse-transport.test.ts checks that
 * this Node's is released).
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { Socket } from 'node:net';

type Parser = object;
type Listener = (...args: unknown[]) => void;
type FreeParser = (parser: Parser, req: IncomingMessage | null, socket: Socket) => void;

const freeParser: FreeParser | null = (() => {
  try {
    const common = createRequire(import.meta.url)('_http_common') as { freeParser?: unknown };
    return typeof common.freeParser === 'function' ? (common.freeParser as FreeParser) : null;
  } catch {
    return null;
  }
})();

/** Node's HTTP server's listeners on a connection's socket, by event (lib/_http_server.js). */
const SERVER_LISTENERS: Readonly<Record<string, string>> = {
  data: 'bound socketOnData',
  end: 'bound socketOnEnd',
  close: 'bound socketOnClose',
  drain: 'bound socketOnDrain',
  error: 'socketOnError',
  timeout: 'socketOnTimeout',
  resume: 'onSocketResume',
  pause: 'onSocketPause',
};
/** The response's own hook on its socket's close, and its hook on finishing (bound to the server's state). */
const RESPONSE_CLOSE = 'onServerResponseClose';
const RESPONSE_FINISH = 'bound resOnFinish';
/** Socket methods the server wraps per connection (to unconsume its parser on a 'data' listener). */
const WRAPPED = ['on', 'addListener', 'prependListener', 'setEncoding'] as const;

type HttpSocket = Socket & {
  parser?: Parser | null;
  _httpMessage?: ServerResponse | null;
  server?: Server | null;
};

const kResponse = Symbol('releasedResponse');
type ReleasedSocket = HttpSocket & { [kResponse]?: ServerResponse | null };

/** Released sockets per server, for its drain's final cut. */
const released = new WeakMap<object, Set<Socket>>();

/** A released socket's errors end it ('close' follows); without a listener one would be thrown. */
function onReleasedError(): void {}

/** The response's pending-data hook: it counted bytes for the server's per-connection state. */
function noPendingData(): void {}

/** The client sent its FIN: end ours too, as Node's server does (`httpAllowHalfOpen` false). */
function onReleasedEnd(this: Socket): void {
  if (this.writable) this.end();
}

/** The socket closed: the response's 'close', as Node's `onServerResponseClose` would emit it. */
function onReleasedClose(this: ReleasedSocket): void {
  released.get(this.server ?? this)?.delete(this);
  const res = this[kResponse];
  this[kResponse] = null;
  if (!res) return;
  (res as ServerResponse & { _closed?: boolean })._closed = true;
  res.destroyed = true;
  res.emit('close');
}

/** The listener of `emitter` for `event` whose name is `name`, or undefined. */
const listenerNamed = (emitter: NodeJS.EventEmitter, event: string, name: string): Listener | undefined =>
  (emitter.rawListeners(event) as Listener[]).find((fn) => fn.name === name);

/**
 * Let go of Node's HTTP state under `res`, whose head has been written by hand and which will never
 * finish; true when done. The response's headers and body are never used again after this.
 */
export const releaseHttp1 = (res: ServerResponse): boolean => {
  const socket = res.socket as ReleasedSocket | null;
  if (!freeParser || !socket || !(socket instanceof Socket)) return false;
  const parser = socket.parser;
  if (!parser || socket._httpMessage !== res || socket.destroyed) return false;
  // Everything found first: on a server that looks different, nothing is touched.
  const found: [string, Listener][] = [];
  for (const [event, name] of Object.entries(SERVER_LISTENERS)) {
    const fn = listenerNamed(socket, event, name);
    if (fn) found.push([event, fn]);
  }
  const ownClose = listenerNamed(socket, 'close', RESPONSE_CLOSE);
  if (found.length !== Object.keys(SERVER_LISTENERS).length || !ownClose) return false;

  for (const [event, fn] of found) socket.removeListener(event, fn);
  // The prototype's own methods back, instead of the per-connection wrappers.
  for (const method of WRAPPED)
    (socket as unknown as Record<string, unknown>)[method] = Socket.prototype[method];
  const finish = listenerNamed(res, 'finish', RESPONSE_FINISH);
  if (finish) res.removeListener('finish', finish);
  (res as unknown as { _onPendingData: () => void })._onPendingData = noPendingData;
  freeParser(parser, res.req, socket);
  res.detachSocket(socket);

  socket[kResponse] = res;
  socket.on('error', onReleasedError);
  socket.on('end', onReleasedEnd);
  socket.on('close', onReleasedClose);
  const key = socket.server ?? socket;
  let set = released.get(key);
  if (!set) released.set(key, (set = new Set()));
  set.add(socket);
  return true;
};

/** Destroy every released socket of `server` (a drain's final cut). */
export const destroyReleased = (server: object): void => {
  const set = released.get(server);
  if (!set) return;
  for (const socket of [...set]) socket.destroy();
};
