/**
 * `followBeeos`: the envelopes of a BeeOS task or conversation (BeeOS "Streaming" §3), once each by
 * envelope offset, reconnecting with `since` = the last offset delivered. The BeeOS surface takes
 * its key as `Authorization: Bearer`, so this uses a streamed fetch (which can send it).
 */
import { authHeaders, HttpError } from './auth.js';
import { openFetchSse, type SseConnection } from './sse-source.js';
import { DEFAULT_TUNING, jitteredBackoff } from './transport-policy.js';
import type { BeeosEnvelope, FollowBeeosOptions, FollowState, Subscription } from './types.js';

const FATAL = new Set([400, 401, 403, 404]);
/** `end` reasons after which the channel has nothing more to say. */
const FINAL_ENDS = new Set(['task_terminal', 'channel_closed']);

export const followBeeos = (options: FollowBeeosOptions): Subscription => {
  const tuning = { ...DEFAULT_TUNING, ...options.tuning };
  const { task, conversation } = options;
  if ((task === undefined) === (conversation === undefined))
    throw new Error('followBeeos: give exactly one of task or conversation');
  const base = options.gateway.replace(/\/+$/, '');
  const kind = task !== undefined ? 'tasks' : 'conversations';
  const path = `${base}/api/v1/agents/${encodeURIComponent(options.capsule)}/${kind}/${encodeURIComponent(task ?? conversation ?? '')}/events`;
  let cursor = options.since ?? 0;
  let generation = 0;
  let closed = false;
  let failures = 0;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let conn: SseConnection | null = null;

  const state = (s: FollowState['state'], reason?: string): void =>
    options.onState?.({ state: s, transport: 'sse', ...(reason ? { reason } : {}) });

  const stop = (): void => {
    generation++;
    if (timer) clearTimeout(timer);
    timer = null;
    conn?.close();
    conn = null;
  };
  const finish = (reason: string): void => {
    if (closed) return;
    stop();
    closed = true;
    state('closed', reason);
  };

  const connect = async (): Promise<void> => {
    if (closed) return;
    const gen = ++generation;
    state('connecting');
    let delivered = false;
    const headers = await authHeaders(options.token);
    if (gen !== generation) return;
    const query = `?since=${cursor}${options.includeDeltas ? '&include_deltas=true' : ''}`;
    conn = openFetchSse(path + query, headers, {
      onOpen: () => undefined,
      onActivity: () => undefined,
      onEvent: (event, _id, data) => {
        if (gen !== generation) return;
        if (!delivered) {
          delivered = true;
          failures = 0;
          state('live');
        }
        let json: Record<string, unknown>;
        try {
          json = JSON.parse(data) as Record<string, unknown>;
        } catch {
          return;
        }
        if (event === 'message') {
          const envelope = json as BeeosEnvelope;
          if (typeof envelope.offset !== 'number' || envelope.offset <= cursor) return;
          cursor = envelope.offset;
          options.onEnvelope(envelope);
        } else if (event === 'replay_complete') {
          options.onReplayComplete?.({ latest_offset: Number(json.latest_offset) });
        } else if (event === 'backfill_truncated') {
          options.onGap?.({
            oldest_redis_offset: Number(json.oldest_redis_offset),
            since: Number(json.since),
            ...(typeof json.hint === 'string' ? { hint: json.hint } : {}),
          });
        } else if (event === 'end') {
          const reason = String(json.reason);
          if (FINAL_ENDS.has(reason)) {
            options.onEnd?.(reason);
            finish(`end: ${reason}`);
          }
        }
      },
      onClose: (error) => {
        if (gen !== generation) return;
        stop();
        if (error instanceof HttpError && FATAL.has(error.status)) return finish(error.message);
        // Cut after delivering (a proxy, a restart): reconnect at once; otherwise back off.
        const delay =
          delivered && !error
            ? Math.random() * 50
            : jitteredBackoff(failures++, tuning, error instanceof HttpError ? error.retryAfterMs : null);
        if (error) state('connecting', error instanceof Error ? error.message : String(error));
        timer = setTimeout(() => void connect(), delivered ? Math.random() * 50 : delay);
      },
    });
  };

  void connect();
  return {
    get cursor() {
      return cursor;
    },
    transport: 'sse',
    close: () => finish('closed by the caller'),
  };
};
