/** Subscription patterns (PROTOCOL.md §6): `*` is one path segment, `**` zero or more. */
export const globMatches = (pattern: string, path: string): boolean => {
  const p = pattern.split('/');
  const s = path.split('/');
  const at = (i: number, j: number): boolean => {
    if (i === p.length) return j === s.length;
    if (p[i] === '**') return at(i + 1, j) || (j < s.length && at(i, j + 1));
    if (j === s.length) return false;
    return (p[i] === '*' ? s[j] !== '' : p[i] === s[j]) && at(i + 1, j + 1);
  };
  return at(0, 0);
};
