/**
 * General Durable Streams grants (`apiKeys[].streams`): path patterns of `/`-separated segments,
 * each a name, `*` (exactly one segment) or `**` (any number of segments, none included), as the
 * protocol's subscription patterns have them. `team-a/**` covers `team-a`, `team-a/x` and
 * `team-a/x/y`; `logs/*` covers `logs/today` only.
 */

/** The grammar config validation enforces: no empty, `.` or `..` segment, `*` only as a whole segment. */
export const validStreamGrant = (grant: string): boolean =>
  grant.length > 0 &&
  grant.length <= 1024 &&
  // eslint-disable-next-line no-control-regex
  !/[\u0000-\u001f\u007f-\u009f]/.test(grant) &&
  grant
    .split('/')
    .every(
      (seg) =>
        seg === '*' || seg === '**' || (seg !== '' && seg !== '.' && seg !== '..' && !seg.includes('*')),
    );

/** Whether `grant` covers the stream path (after `/v1/stream/`, decoded). Linear in segments × pattern. */
export const grantCovers = (grant: string, path: string): boolean => {
  const g = grant.split('/');
  const p = path.split('/');
  // reach[j]: the pattern's first i segments can match the path's first j segments.
  let reach: boolean[] = Array.from({ length: p.length + 1 }, (_, j) => j === 0);
  for (const seg of g) {
    const next: boolean[] = new Array<boolean>(p.length + 1).fill(false);
    if (seg === '**') {
      let any = false;
      for (let j = 0; j <= p.length; j++) next[j] = any ||= reach[j]!;
    } else {
      for (let j = 1; j <= p.length; j++) next[j] = reach[j - 1]! && (seg === '*' || seg === p[j - 1]);
    }
    reach = next;
  }
  return reach[p.length]!;
};

export const grantsCover = (grants: readonly string[] | undefined, path: string): boolean =>
  grants !== undefined && grants.some((g) => grantCovers(g, path));
