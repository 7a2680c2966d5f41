/**
 * The `EPOCH_OFFSET` wire form of a log position, `EEEEEEEEEEEEEEEE_OOOOOOOOOOOOOOOO` (store epoch,
 * then log offset, 16 digits each): the offsets of the Flue surface and of the Durable Streams
 * capsule streams. Sorting the strings sorts the positions; an offset of another epoch is
 * recognisable without a store lookup.
 */
const pad16 = (n: number): string => String(n).padStart(16, '0');

export const formatEpochOffset = (epoch: number, offset: number): string =>
  `${pad16(epoch)}_${pad16(offset)}`;

const EPOCH_OFFSET_RE = /^(\d{16})_(\d{16})$/;

/** The epoch and offset of a well-formed `EPOCH_OFFSET`; null when malformed. */
export const parseEpochOffset = (raw: string): { epoch: number; offset: number } | null => {
  const m = EPOCH_OFFSET_RE.exec(raw);
  if (!m || !m[1] || !m[2]) return null;
  // Well-formed but huge values stay numbers that compare beyond any head or epoch.
  return { epoch: Number(m[1]), offset: Number(m[2]) };
};
