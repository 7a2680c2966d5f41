/**
 * General-stream grants (`apiKeys[].streams`): which paths a pattern covers, and the patterns the
 * configuration accepts (a refused one stops start-up naming the field).
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { grantCovers, validStreamGrant } from '../../src/auth/stream-grants.js';
import { ConfigError, loadConfig } from '../../src/config/load.js';

describe('grantCovers', () => {
  it.each([
    ['team-a/**', 'team-a', true],
    ['team-a/**', 'team-a/x', true],
    ['team-a/**', 'team-a/x/y/z', true],
    ['team-a/**', 'team-ab/x', false],
    ['team-a/**', 'x/team-a', false],
    ['team-a/*', 'team-a/x', true],
    ['team-a/*', 'team-a', false],
    ['team-a/*', 'team-a/x/y', false],
    ['*/logs', 'a/logs', true],
    ['*/logs', 'a/b/logs', false],
    ['**/logs', 'logs', true],
    ['**/logs', 'a/b/logs', true],
    ['**/logs', 'a/b/logs/x', false],
    ['a/**/b/**/c', 'a/x/b/y/z/c', true],
    ['a/**/b/**/c', 'a/c', false],
    ['**', 'anything/at/all', true],
    ['exact', 'exact', true],
    ['exact', 'exactly', false],
  ])('%s covers %s: %s', (grant, path, covered) => {
    expect(grantCovers(grant, path)).toBe(covered);
  });

  it('stays linear on patterns of many ** against long paths', () => {
    const path = Array.from({ length: 500 }, () => 'a').join('/');
    expect(grantCovers(`${'**/'.repeat(50)}b`, path)).toBe(false);
  });
});

describe('validStreamGrant', () => {
  it.each(['team-a/**', '*', '**', 'a/*/b', 'logs'])('accepts %s', (grant) => {
    expect(validStreamGrant(grant)).toBe(true);
  });
  it.each(['', 'a//b', '/a', 'a/', 'a/../b', './a', 'a*', 'a/b*c', '***', 'a\u0000b', 'x'.repeat(1025)])(
    'refuses %j',
    (grant) => {
      expect(validStreamGrant(grant)).toBe(false);
    },
  );

  it('stops start-up on a refused grant, naming the field', () => {
    const p = join(mkdtempSync(join(tmpdir(), 'mg-grants-')), 'grants.yaml');
    writeFileSync(
      p,
      `auth:\n  apiKeys:\n    - sha256: ${'a'.repeat(64)}\n      owner: team\n      scopes: [write]\n      streams: ["team-a/../b"]\n`,
    );
    let message = '';
    try {
      loadConfig({ config: p }, {});
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      message = (err as Error).message;
    }
    expect(message).toContain('\n  auth.apiKeys[0].streams[0]: must be "/"-separated segments');
  });
});
