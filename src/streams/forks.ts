/**
 * Forks (PROTOCOL.md §4.2), the rules both stores share. A fork inherits its source's messages up
 * to the fork point without copying them: a read stitches the ancestors' messages and the fork's
 * own. The fork has an epoch of its own (above its source's, so no offset ever names two
 * positions), and also accepts the source's offsets up to the fork point, which name the very same
 * inherited messages: a reader moves from the source to the fork without starting over. The Redis
 * store's scripts restate these rules (a script cannot import).
 */
import type { EpochAlias, ForkRequest, StreamConfig, StreamMeta } from './types.js';

/**
 * How deep forks of forks nest: a read walks the chain (one step per ancestor), so its length is
 * bounded like any other per-request cost.
 */
export const MAX_FORK_DEPTH = 64;
export const TOO_DEEP = `forks nest at most ${MAX_FORK_DEPTH} deep`;

export type OffsetVerdict = { position: number } | { code: 'offset_gone' | 'bad_request'; message: string };

const OFFSET_GONE = 'offset from an earlier epoch of this stream';
const OFFSET_BEYOND = 'offset beyond the tail of the stream';

/**
 * Where the offset `epoch_position` points in the stream. Position 0 names the empty prefix of any
 * epoch (nothing was received, so nothing can be skipped or repeated); an ancestor's offset up to
 * the fork point names inherited messages; another earlier epoch is 410; a later one, or a position
 * past the tail, is 400.
 */
export const resolveOffset = (meta: StreamMeta, epoch: number, position: number): OffsetVerdict => {
  if (position === 0) return { position: 0 };
  if (epoch === meta.epoch) {
    return position <= meta.tail ? { position } : { code: 'bad_request', message: OFFSET_BEYOND };
  }
  const alias = meta.aliases.find((a) => a.epoch === epoch);
  if (alias) {
    return position <= alias.upTo
      ? { position }
      : { code: 'bad_request', message: 'offset of the source past the fork point' };
  }
  if (epoch < meta.epoch) return { code: 'offset_gone', message: OFFSET_GONE };
  return { code: 'bad_request', message: OFFSET_BEYOND };
};

/** A fork at `forkPoint` of `source` accepts the source's epoch and the source's own aliases, capped. */
export const forkAliases = (source: StreamMeta, forkPoint: number): EpochAlias[] => [
  { epoch: source.epoch, upTo: forkPoint },
  ...source.aliases.map((a) => ({ epoch: a.epoch, upTo: Math.min(a.upTo, forkPoint) })),
];

/** What a repeated fork PUT is compared by, as the client wrote it (sub-offset 0 is no sub-offset). */
export const forkSpecOf = (fork: ForkRequest): string =>
  `${fork.source}\n${fork.offset ? `${fork.offset.epoch}_${fork.offset.position}` : ''}\n${fork.subOffset}`;

/** The fork's configuration: what the PUT omitted comes from the source; a fork starts open unless told. */
export const forkConfigOf = (config: StreamConfig, fork: ForkRequest, source: StreamMeta): StreamConfig => ({
  contentType: fork.inheritContentType ? source.contentType : config.contentType,
  ttlSeconds: fork.inheritExpiry ? source.ttlSeconds : config.ttlSeconds,
  expiresAt: fork.inheritExpiry ? source.expiresAt : config.expiresAt,
  closed: config.closed,
});

/** An existing stream at the fork's path answers 200 when what the PUT gave matches it, else 409. */
export const sameAsExisting = (
  existing: StreamMeta,
  existingSpec: string,
  config: StreamConfig,
  fork: ForkRequest,
): boolean =>
  existingSpec === forkSpecOf(fork) &&
  (fork.inheritContentType || existing.contentType === config.contentType) &&
  (fork.inheritExpiry ||
    (existing.ttlSeconds === config.ttlSeconds && existing.expiresAt === config.expiresAt)) &&
  existing.closed === config.closed;

export type ForkPoint =
  { forkPoint: number; prefix: Buffer | null } | { code: 'bad_request'; message: string };

/**
 * The fork point after `position` and the sub-offset. JSON mode: the sub-offset counts messages
 * (each flattened element is one message here), so it moves the fork point. Bytes: it takes that
 * many bytes of the next message, copied into the fork as its first own message (only a partial
 * message is copied; a whole one is inherited).
 */
export const forkPointOf = (
  position: number,
  subOffset: number,
  tail: number,
  jsonMode: boolean,
  next: Buffer | undefined,
): ForkPoint => {
  if (subOffset === 0) return { forkPoint: position, prefix: null };
  if (jsonMode) {
    return position + subOffset <= tail
      ? { forkPoint: position + subOffset, prefix: null }
      : { code: 'bad_request', message: 'Stream-Fork-Sub-Offset past the messages of the source' };
  }
  if (!next || subOffset > next.length) {
    return { code: 'bad_request', message: 'Stream-Fork-Sub-Offset past the next message of the source' };
  }
  return subOffset === next.length
    ? { forkPoint: position + 1, prefix: null }
    : { forkPoint: position, prefix: next.subarray(0, subOffset) };
};
