/** Stream offsets as the general streams hand them out (`EPOCH_POSITION`, 16 digits each). */
const pad16 = (n: number): string => String(n).padStart(16, '0');

export const formatStreamOffset = (epoch: number, position: number): string =>
  `${pad16(epoch)}_${pad16(position)}`;

/** `{epoch, position}` of a well-formed offset; null otherwise (`-1` and `now` included). */
export const parseStreamOffset = (raw: string): { epoch: number; position: number } | null => {
  const m = /^(\d{16})_(\d{16})$/.exec(raw);
  return m ? { epoch: Number(m[1]), position: Number(m[2]) } : null;
};
