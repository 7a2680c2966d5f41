/** The package's version, read from its package.json (beside src/ from source, above dist/src/ built). */
import { existsSync, readFileSync } from 'node:fs';

export const packageVersion = (): string => {
  for (const rel of ['../package.json', '../../package.json']) {
    const url = new URL(rel, import.meta.url);
    if (!existsSync(url)) continue;
    const pkg = JSON.parse(readFileSync(url, 'utf8')) as { name?: string; version?: string };
    if (pkg.name === 'murmur-gateway' && pkg.version) return pkg.version;
  }
  return 'unknown';
};
