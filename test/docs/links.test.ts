/**
 * Every link in the README and docs/ resolves inside the repository: a relative link names a file
 * that exists here (never `../shared/…` or anything else outside), and a `#anchor` names a heading
 * of its page. Public pages are linked by their public URLs.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(new URL('../..', import.meta.url).pathname);

const markdownFiles = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return markdownFiles(path);
    return name.endsWith('.md') ? [path] : [];
  });

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to `-`. */
const anchorsOf = (file: string): Set<string> =>
  new Set(
    [...readFileSync(file, 'utf8').matchAll(/^#{1,6} (.+)$/gm)].map((m) =>
      m[1]!
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, '')
        .replace(/ /g, '-'),
    ),
  );

/** Markdown links outside code blocks and spans: [text](target). */
const linksOf = (text: string): string[] =>
  [
    ...text
      .replace(/```[\s\S]*?```/g, '')
      .replace(/`[^`\n]*`/g, '')
      .matchAll(/\]\(([^)\s]+)\)/g),
  ].map((m) => m[1]!);

const pages = [join(root, 'README.md'), ...markdownFiles(join(root, 'docs'))];

describe('documentation links', () => {
  it.each(pages.map((p) => [relative(root, p), p]))(
    '%s: every link resolves inside the repository',
    (_, page) => {
      const broken: string[] = [];
      for (const link of linksOf(readFileSync(page, 'utf8'))) {
        if (/^(https?:|mailto:)/.test(link)) continue;
        const [path, anchor] = link.split('#') as [string, string | undefined];
        const target = path === '' ? page : resolve(dirname(page), decodeURIComponent(path));
        if (relative(root, target).startsWith('..')) broken.push(`${link}: outside the repository`);
        else if (!existsSync(target)) broken.push(`${link}: no such file`);
        else if (anchor && target.endsWith('.md') && !anchorsOf(target).has(anchor))
          broken.push(`${link}: no heading #${anchor}`);
      }
      expect(broken).toEqual([]);
    },
  );

  it('the README names no file outside the repository, in a link or in code', () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    expect(readme).not.toMatch(/\.\.\/shared|shared\/(specs|notes)/);
  });
});
