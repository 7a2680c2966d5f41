/**
 * JSON-RPC calls to one capsule's door (with its door token): submit a task (`message/stream`),
 * cancel one (`tasks/cancel`), forward other methods raw. Frames reach the log through the watch
 * (ingestor.ts), never from here: a submit connection is drained and dropped after its outcome.
 */
import http from 'node:http';
import https from 'node:https';
import { GatewayError } from '../errors.js';
import type { CancelOutcome, RpcForwardResult, SubmitOutcome } from '../core/types.js';
import type { ReleaseLine } from '../log/record.js';
import { speaksA2a1 } from '../core/release-lines.js';
import { readAgentCard } from './agent-card.js';
import { SseFrameReader, type SseFrame } from './sse-frames.js';
import { WatchTap } from './task-start.js';

export interface CapsuleClientOptions {
  url: string;
  /** Sent as `Authorization: Bearer …`; never logged, never in a reason. */
  doorToken?: string | null;
  /** How long a submit may wait for its outcome (queued tasks may wait long). */
  submitTimeoutMs?: number;
  /** Timeout for plain JSON calls (cancel, forward). */
  callTimeoutMs?: number;
  /** Largest JSON answer read (bytes). */
  maxBodyBytes?: number;
  /**
   * Frames the capsule's watch delivers (the ingestor's), as a subscription returning its unsubscribe.
   * `message/stream` closes on the first final status of ANY task (spec "Endpoints"), so a queued task
   * may start after its submit connection closed; the watch still shows its first frame. `after` is
   * the log offset of the submission's record (when it has one): its task's frames all come later.
   */
  watchFrames?: (listener: (frame: SseFrame) => void, after?: number) => () => void;
  /** How long a release line read off the agent card is trusted before it is read again (ms). */
  cardMaxAgeMs?: number;
  /** The line this replica's own watch read off the card just now (null: it does not ingest). */
  watchedLine?: () => ReleaseLine | null;
}

/** The A2A 1.0 door's names for the methods this client builds (docs/release-lines.md). */
const METHODS: Record<'stream' | 'cancel', [spec: string, a2a1: string]> = {
  stream: ['message/stream', 'SendStreamingMessage'],
  cancel: ['tasks/cancel', 'CancelTask'],
};

/** Final states, in murmur's words and the 1.0 door's JSON-RPC words. */
const ENDED = /^(completed|failed|rejected|TASK_STATE_(COMPLETED|FAILED|REJECTED))$/;

export interface SubmitParams {
  text: string;
  contextId: string;
  messageId: string;
  /** A caller's own `message/stream` body, forwarded byte for byte instead of one built here. */
  rawBody?: string;
  rpcId?: string | number;
  /** The log offset of this submission's record: the watch is read from there. */
  after?: number;
  /** Sent as the `traceparent` header: the capsule continues the gateway's trace. */
  traceparent?: string;
}

interface Raw {
  status: number;
  contentType: string;
  res: http.IncomingMessage;
}

const reasonOf = (err: unknown): string => {
  const e = err as NodeJS.ErrnoException;
  return e?.code ?? e?.message ?? String(err);
};

const parseJson = (text: string): Record<string, unknown> | null => {
  try {
    const v: unknown = JSON.parse(text);
    return v !== null && typeof v === 'object' ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
};

const rpcErrorCode = (body: string): number | null => {
  const err = parseJson(body)?.error as { code?: unknown } | undefined;
  return typeof err?.code === 'number' ? err.code : null;
};

/** -32601 (method not found) or -32009 (the 1.0 door's missing A2A-Version): refused before it ran. */
const dialectRefused = (outcome: SubmitOutcome): boolean =>
  outcome.kind === 'method-not-found' ||
  (outcome.kind === 'invalid' && rpcErrorCode(outcome.data) === -32009);

export class CapsuleClient {
  private readonly agent: http.Agent;
  private readonly open = new Set<http.ClientRequest>();
  private rpcSeq = 0;
  private known: { line: ReleaseLine; at: number } | null = null;

  constructor(private readonly options: CapsuleClientOptions) {
    this.agent = new http.Agent({ keepAlive: true, keepAliveMsecs: 15_000 });
  }

  get url(): string {
    return this.options.url;
  }

  /** Send `message/stream` and return the first outcome of OUR task (by context id, see below). */
  async submit(params: SubmitParams): Promise<SubmitOutcome> {
    const timeoutMs = this.options.submitTimeoutMs ?? 60_000;
    // Watch for our task before sending: its first frame may reach the watch before our headers.
    const frames = this.options.watchFrames;
    const watch = new WatchTap(
      params.contextId,
      frames ? (listener) => frames(listener, params.after) : undefined,
    );
    try {
      const line = await this.line();
      const outcome = await this.submitOnce(
        this.submitBody(params, line),
        params.contextId,
        timeoutMs,
        watch,
        params.traceparent,
      );
      // Refused for its dialect (a capsule upgraded in place since the card was read): nothing ran,
      // so it is sent once more in the dialect the card says now.
      if (params.rawBody === undefined && dialectRefused(outcome)) {
        const now = await this.line(true);
        if (now !== line)
          return await this.submitOnce(
            this.submitBody(params, now),
            params.contextId,
            timeoutMs,
            watch,
            params.traceparent,
          );
      }
      return outcome;
    } finally {
      watch.close();
    }
  }

  private submitBody(params: SubmitParams, line: ReleaseLine): string {
    if (params.rawBody !== undefined) return params.rawBody;
    const a2a1 = speaksA2a1(line);
    return JSON.stringify({
      jsonrpc: '2.0',
      id: params.rpcId ?? `gw-${++this.rpcSeq}`,
      method: METHODS.stream[a2a1 ? 1 : 0],
      params: {
        message: {
          messageId: params.messageId,
          role: a2a1 ? 'ROLE_USER' : 'user',
          parts: [{ text: params.text }],
          contextId: params.contextId,
        },
      },
    });
  }

  private async submitOnce(
    body: string,
    contextId: string,
    timeoutMs: number,
    watch: WatchTap,
    traceparent?: string,
  ): Promise<SubmitOutcome> {
    let raw: Raw;
    try {
      // A fresh socket: the SSE body ends only when the capsule closes the connection.
      raw = await this.post(body, false, timeoutMs, traceparent);
    } catch (err) {
      return { kind: 'unreachable', reason: reasonOf(err) };
    }
    if (raw.status !== 200) {
      raw.res.resume();
      return { kind: 'unreachable', reason: `HTTP ${raw.status}` };
    }
    if (raw.contentType.startsWith('application/json')) {
      const text = await this.readBody(raw.res).catch(() => null);
      if (text === null) return { kind: 'unreachable', reason: 'answer cut off' };
      // `task_acceptance: none` answers -32601 as JSON (spec "Endpoints"); other JSON errors are refusals.
      return rpcErrorCode(text) === -32601
        ? { kind: 'method-not-found', body: text }
        : { kind: 'invalid', data: text };
    }
    if (!raw.contentType.startsWith('text/event-stream')) {
      raw.res.resume();
      return { kind: 'unreachable', reason: `unexpected content-type ${raw.contentType}` };
    }
    return this.readOutcome(raw.res, contextId, timeoutMs, watch);
  }

  /**
   * The connection carries every task's frames (spec "Endpoints": neither endpoint filters), so our
   * task is the first `working` status whose `context_id` is the one we sent. Limit: a queued task of
   * the same context that starts first would be taken for ours. `rejected` and `error` are written only
   * to the submitting connection, so they are ours.
   */
  private readOutcome(
    res: http.IncomingMessage,
    contextId: string,
    timeoutMs: number,
    watch: WatchTap,
  ): Promise<SubmitOutcome> {
    return new Promise<SubmitOutcome>((resolve) => {
      let done = false;
      const settle = (outcome: SubmitOutcome): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve(outcome);
      };
      const onWatch = (frame: SseFrame): void => {
        const taskId = watch.detector.consider(frame);
        if (taskId !== null) settle({ kind: 'accepted', taskId, contextId });
      };
      const timer = setTimeout(() => {
        settle({ kind: 'unreachable', reason: 'timeout waiting for the task to start' });
        res.destroy();
      }, timeoutMs);
      // After the timer exists: onStart calls back at once when the watch already saw our task start.
      watch.onStart((taskId) => settle({ kind: 'accepted', taskId, contextId }));
      const onFrame = (frame: SseFrame): void => {
        if (done) return;
        if (frame.event === 'error') return settle({ kind: 'invalid', data: frame.data });
        if (frame.event !== 'status') return;
        const data = parseJson(frame.data);
        const status = data?.status as { state?: unknown } | undefined;
        if (status?.state === 'rejected') {
          return settle({ kind: 'rejected', frame: { id: frame.upstreamId, data: frame.data } });
        }
        onWatch(frame);
      };
      const reader = new SseFrameReader({ onFrame });
      // After the outcome the stream is drained to its end in the background (ingestion reads the watch).
      res.on('data', (chunk: Buffer) => {
        if (!done) reader.push(chunk);
      });
      res.on('error', (err) => settle({ kind: 'unreachable', reason: reasonOf(err) }));
      res.on('close', () => {
        // A clean end after another task's final status: our task is queued; the watch will show it.
        if (res.complete && watch.active) return;
        settle({ kind: 'unreachable', reason: 'stream closed before the task started' });
      });
    });
  }

  /** `tasks/cancel` with the capsule's task id. */
  async cancel(taskId: string): Promise<CancelOutcome> {
    const a2a1 = speaksA2a1(await this.line());
    const id = `gw-${++this.rpcSeq}`;
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: METHODS.cancel[a2a1 ? 1 : 0],
      params: { id: taskId },
    });
    let result: RpcForwardResult;
    try {
      result = await this.call(body);
    } catch (err) {
      return { kind: 'unreachable', reason: err instanceof GatewayError ? err.message : reasonOf(err) };
    }
    if (result.status !== 200 || !result.contentType.startsWith('application/json')) {
      return { kind: 'unreachable', reason: `HTTP ${result.status}` };
    }
    const parsed = parseJson(result.body);
    if (parsed && 'result' in parsed) {
      // From 0.6 an ended task comes back unchanged rather than as -32002: the same answer to us.
      const state = (parsed.result as { status?: { state?: unknown } } | null)?.status?.state;
      if (typeof state === 'string' && ENDED.test(state)) {
        const error = { code: -32002, message: 'Task cannot be canceled' };
        return { kind: 'not-cancelable', body: JSON.stringify({ jsonrpc: '2.0', id, error }) };
      }
      return { kind: 'canceled', body: result.body };
    }
    const code = rpcErrorCode(result.body);
    if (code === -32601) return { kind: 'method-not-found', body: result.body };
    return { kind: 'not-cancelable', body: result.body };
  }

  /** Forward a JSON-RPC body as is; the answer comes back raw. Throws `upstream_unreachable`. */
  async forward(body: string): Promise<RpcForwardResult> {
    await this.line();
    return this.call(body);
  }

  /** The raw upstream response of a `message/stream` (for a byte-for-byte pass-through). */
  async openMessageStream(body: string): Promise<http.IncomingMessage> {
    await this.line();
    try {
      return (await this.post(body, false, this.options.callTimeoutMs ?? 10_000)).res;
    } catch (err) {
      throw new GatewayError('upstream_unreachable', `capsule unreachable: ${reasonOf(err)}`);
    }
  }

  /**
   * The capsule's release line as its card says (read again once older than cardMaxAgeMs): it
   * picks the method names and headers of what this client builds. Unreadable: the last known line,
   * else the spec's. `fresh`: read the card now (a call was refused for its dialect).
   */
  async line(fresh = false): Promise<ReleaseLine> {
    // The owner's watch reads the card before every connection: no second read of our own.
    const watched = fresh ? null : (this.options.watchedLine?.() ?? null);
    if (watched) {
      this.known = { line: watched, at: Date.now() };
      return watched;
    }
    const maxAge = this.options.cardMaxAgeMs ?? 30_000;
    if (!fresh && this.known && Date.now() - this.known.at < maxAge) return this.known.line;
    try {
      const card = await readAgentCard(this.options.url, { agent: this.agent, timeoutMs: 2000 });
      this.known = { line: card.line, at: Date.now() };
    } catch {
      return this.known?.line ?? 'spec';
    }
    return this.known.line;
  }

  /** Destroy open submit connections and pooled sockets. */
  close(): void {
    for (const req of this.open) req.destroy();
    this.open.clear();
    this.agent.destroy();
  }

  private async call(body: string): Promise<RpcForwardResult> {
    const timeoutMs = this.options.callTimeoutMs ?? 10_000;
    let raw: Raw;
    try {
      raw = await this.post(body, true, timeoutMs);
    } catch (err) {
      throw new GatewayError('upstream_unreachable', `capsule unreachable: ${reasonOf(err)}`);
    }
    let text: string;
    try {
      text = await this.readBody(raw.res);
    } catch (err) {
      throw new GatewayError('upstream_unreachable', `capsule answer cut off: ${reasonOf(err)}`);
    }
    return { status: raw.status, contentType: raw.contentType, body: text };
  }

  /** POST / with the door token; resolves at the response headers. */
  private post(body: string, pooled: boolean, timeoutMs: number, traceparent?: string): Promise<Raw> {
    const url = new URL(this.options.url);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
    };
    if (this.options.doorToken) headers.authorization = `Bearer ${this.options.doorToken}`;
    if (traceparent) headers.traceparent = traceparent;
    // The 1.0 door refuses any request without exactly one A2A-Version (-32009).
    if (this.known && speaksA2a1(this.known.line)) headers['a2a-version'] = '1.0';
    const request = url.protocol === 'https:' ? https.request : http.request;
    return new Promise<Raw>((resolve, reject) => {
      const req = request(url, { method: 'POST', headers, agent: pooled ? this.agent : false });
      this.open.add(req);
      req.on('close', () => this.open.delete(req));
      const timer = setTimeout(
        () => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })),
        timeoutMs,
      );
      req.on('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
      req.on('response', (res) => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, contentType: String(res.headers['content-type'] ?? ''), res });
      });
      req.end(body);
    });
  }

  private readBody(res: http.IncomingMessage): Promise<string> {
    const max = this.options.maxBodyBytes ?? 10 * 1024 * 1024;
    return new Promise<string>((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > max) res.destroy(new Error('answer too large'));
        else chunks.push(c);
      });
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      res.on('error', reject);
      res.on('aborted', () => reject(new Error('aborted')));
    });
  }
}
