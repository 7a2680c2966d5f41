/**
 * `GET …/{tasks|conversations}/{id}/events`: replay the channel from its first record, emit
 * envelopes past `since`, `replay_complete`, then live envelopes and exactly one `end`
 * (beeos-streaming.md §3-§4). Also the JSON page reader of `…/messages`. HTTP details live in routes.
 */
import { isStoreReset } from '../../src/core/store-reset.js';
import type { AdapterDeps } from '../../src/http/adapter-deps.js';
import type { LogRecord } from '../../src/log/record.js';
import type { Channel } from './channels.js';
import { OFFSET_SLOTS, READ_PAGE } from './constants.js';
import type { EndReason } from './constants.js';
import {
  encodeBackfillTruncated,
  encodeEnd,
  encodeEnvelope,
  encodeKeepalive,
  encodeReplayComplete,
} from './codec.js';
import { ChannelProjector } from './projection.js';
import type { Projected } from './projection.js';
import { SseWriter } from './sse-writer.js';

export const projectorFor = (channel: Channel, agentId: string): ChannelProjector =>
  new ChannelProjector({
    kind: channel.kind,
    agentId,
    contextId: channel.contextId,
    owner: channel.owner,
    taskIds: [...(channel.upstreamTaskIds ?? [])],
  });

/** Project the whole retained channel (JSON reads: status, messages). Bounded by the head at start. */
export const projectChannel = async (
  deps: AdapterDeps,
  channel: Channel,
  onEnvelope?: (p: Projected) => void,
): Promise<ChannelProjector> => {
  const projector = projectorFor(channel, channel.capsule);
  const { head } = await deps.core.position(channel.capsule);
  let after = Math.max(0, channel.startOffset - 1);
  while (after < head) {
    const page = await deps.core.read(channel.capsule, after, READ_PAGE);
    if (page.records.length === 0) break;
    for (const record of page.records) {
      after = record.offset;
      if (record.offset > head) break;
      for (const p of projector.project(record).envelopes) onEnvelope?.(p);
    }
  }
  return projector;
};

/**
 * Encoded envelopes per record object and (channel, projector state before it): the hub hands the
 * same record objects to every subscriber of a capsule, so N readers of a channel encode each frame
 * once (the cumulative `body` makes encoding the costly part). Entries die with their records.
 */
const encodedByRecord = new WeakMap<LogRecord, Map<string, string[]>>();

const encodeStep = (record: LogRecord, key: string, envelopes: readonly Projected[]): readonly string[] => {
  let byKey = encodedByRecord.get(record);
  const hit = byKey?.get(key);
  if (hit) return hit;
  const texts = envelopes.map((p) => encodeEnvelope(p.envelope));
  if (!byKey) encodedByRecord.set(record, (byKey = new Map()));
  byKey.set(key, texts);
  return texts;
};

const HINT_TRUNCATED =
  'records before oldest_redis_offset have aged out of the log; GET /messages for what survives';
const HINT_RESET =
  'the log store lost records before oldest_redis_offset (store reset); GET /messages for what survives';
const HINT_AHEAD = 'since is beyond the head of the log (the store was reset): replaying from the start';

/** Open the SSE stream of a channel. Resolves once the first checks are done; frames follow. */
export const openChannelStream = async (
  deps: AdapterDeps,
  channel: Channel,
  sinceIn: number,
  includeDeltas: boolean,
  signal: AbortSignal,
): Promise<ReadableStream<Uint8Array>> => {
  const { core, config } = deps;
  const capsule = channel.capsule;
  const position = await core.position(capsule);
  const writer = new SseWriter(signal);
  let since = sinceIn;
  const start = channel.startOffset;

  if (Math.floor(since / OFFSET_SLOTS) > position.head) {
    writer.write(encodeBackfillTruncated(position.first * OFFSET_SLOTS, since, HINT_AHEAD));
    since = 0;
  } else {
    const needed = since === 0 ? start : Math.max(start, Math.floor(since / OFFSET_SLOTS) + 1);
    if (needed < position.first && start < position.first)
      writer.write(encodeBackfillTruncated(position.first * OFFSET_SLOTS, since, HINT_TRUNCATED));
  }

  const projector = projectorFor(channel, capsule);
  const headAtOpen = position.head;
  let replayDone = false;
  let ended = false;

  const completeReplay = (): void => {
    if (replayDone) return;
    replayDone = true;
    writer.write(encodeReplayComplete(Math.max(projector.latestOffset, since)));
  };
  const end = (reason: EndReason): void => {
    if (ended) return;
    ended = true;
    completeReplay();
    writer.write(encodeEnd(reason));
    writer.close();
  };

  const onRecords = async (records: readonly LogRecord[]): Promise<void> => {
    for (const record of records) {
      if (ended || writer.closed) return;
      // The store lost records before this point (a new epoch starts here): whatever of this
      // channel they held is gone for every reader that had not read past it.
      if (isStoreReset(record) && record.offset * OFFSET_SLOTS > since)
        writer.write(encodeBackfillTruncated(record.offset * OFFSET_SLOTS, since, HINT_RESET));
      const key = `${channel.id}\u0000${projector.stateKey()}`;
      const step = projector.project(record);
      if (step.envelopes.length > 0) {
        const texts = encodeStep(record, key, step.envelopes);
        step.envelopes.forEach((p, i) => {
          if (p.envelope.offset > since && (includeDeltas || !p.delta)) writer.write(texts[i] ?? '');
        });
      }
      if (step.end) return end(step.end);
      // A capsule that closes its stream ends every live channel stream; a closure already in the
      // history does not (the capsule may have come back since).
      if (record.kind === 'fact' && record.fact === 'capsule-closed' && record.offset > headAtOpen)
        return end('stream_closed');
      if (record.offset >= headAtOpen) completeReplay();
    }
    await writer.ready();
  };

  const readFrom = Math.max(start, position.first);
  if (headAtOpen < readFrom) completeReplay();

  const abort = new AbortController();
  const subscription = core.subscribe(capsule, {
    after: readFrom - 1,
    onRecords,
    onEnd: (reason) => {
      if (reason === 'shutdown') end('stream_closed');
      else writer.close(); // slow / store error: the client reconnects with its last offset
    },
    maxQueuedRecords: config.maxQueuedRecords,
    signal: abort.signal,
  });
  const onShutdown = (): void => end('stream_closed');
  if (core.shutdownSignal.aborted) queueMicrotask(onShutdown);
  else core.shutdownSignal.addEventListener('abort', onShutdown, { once: true });
  const keepalive = setInterval(() => writer.write(encodeKeepalive()), config.heartbeatMs);
  writer.onClose(() => {
    clearInterval(keepalive);
    core.shutdownSignal.removeEventListener('abort', onShutdown);
    abort.abort();
    subscription.close();
  });
  return writer.stream;
};
