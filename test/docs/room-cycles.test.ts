/**
 * Rooms read from one end: inside a room (a folder of src/ or adapters/), no file imports, directly
 * or through others of the room, a file that imports it back. Type-only imports count too: a reader
 * follows them the same way. Imports between rooms are the architecture's arrows, checked elsewhere.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(dirname(new URL(import.meta.url).pathname), '../..');

const tsFiles = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return tsFiles(path);
    return name.endsWith('.ts') && !name.endsWith('.d.ts') ? [path] : [];
  });

const IMPORT = /^\s*(?:import|export)\s[^'"]*?from\s+'(\.[^']+)'|^\s*import\s+'(\.[^']+)'/gm;

/** The files of `dir` (not its sub-folders) each imports, among the same folder's files. */
const graphOf = (dir: string, files: string[]): Map<string, string[]> => {
  const own = new Set(files.filter((f) => dirname(f) === dir));
  const graph = new Map<string, string[]>();
  for (const file of own) {
    const targets: string[] = [];
    for (const m of readFileSync(file, 'utf8').matchAll(IMPORT)) {
      const spec = (m[1] ?? m[2])!;
      const target = resolve(dirname(file), spec.replace(/\.js$/, '.ts'));
      if (own.has(target) && target !== file) targets.push(target);
    }
    graph.set(file, targets);
  }
  return graph;
};

/** One cycle of the graph, as file names, or null. */
const findCycle = (graph: Map<string, string[]>): string[] | null => {
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (node: string): string[] | null => {
    state.set(node, 'open');
    stack.push(node);
    for (const next of graph.get(node) ?? []) {
      if (state.get(next) === 'open') return [...stack.slice(stack.indexOf(next)), next];
      if (!state.has(next)) {
        const found = visit(next);
        if (found) return found;
      }
    }
    stack.pop();
    state.set(node, 'done');
    return null;
  };
  for (const node of graph.keys()) {
    if (state.has(node)) continue;
    const found = visit(node);
    if (found) return found;
  }
  return null;
};

const files = [...tsFiles(join(root, 'src')), ...tsFiles(join(root, 'adapters'))];
const rooms = [...new Set(files.map((f) => dirname(f)))].sort();

describe('no import cycle inside a room', () => {
  for (const room of rooms) {
    it(relative(root, room), () => {
      const cycle = findCycle(graphOf(room, files));
      expect(cycle?.map((f) => relative(root, f)) ?? null).toBeNull();
    });
  }
});
