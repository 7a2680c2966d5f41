/**
 * The one table `npm run bench` ends with (issue 11): one row per figure, beside its target and,
 * where one exists, the anchor measured in the same run (nginx + nchan for native fan-out, the
 * native surface for BeeOS and Flue, raw pipelined XADD for ingest, the 10-conversation log for
 * reads), with whether it was met (null: not judged here, e.g. skipped, failed or flagged).
 */
export interface Figure {
  figure: string;
  target: string;
  /** The same-run reference the target is relative to, as measured. */
  anchor?: string;
  measured: string;
  met: boolean | null;
}

export const summaryRows = (figures: Figure[]): Record<string, string>[] =>
  figures.map((f) => ({
    figure: f.figure,
    target: f.target,
    'anchor (same run)': f.anchor ?? '–',
    measured: f.measured,
    'met?': f.met === null ? '–' : f.met ? 'yes' : 'NO',
  }));

/** A Markdown table of the same rows, to paste into docs/benchmarks.md. */
export const summaryMarkdown = (figures: Figure[]): string => {
  const rows = summaryRows(figures);
  const cols = ['figure', 'target', 'anchor (same run)', 'measured', 'met?'];
  const line = (cells: string[]): string => `| ${cells.map((c) => c.replace(/\|/g, '\\|')).join(' | ')} |`;
  return [line(cols), line(cols.map(() => '---')), ...rows.map((r) => line(cols.map((c) => r[c]!)))].join(
    '\n',
  );
};

export const printSummary = (figures: Figure[], header?: string): void => {
  if (figures.length === 0) return;
  console.log('\n# summary (issue 11 targets)');
  if (header) console.log(header);
  console.table(summaryRows(figures));
  console.log('\nthe same, as Markdown:\n');
  console.log(summaryMarkdown(figures));
};

/** A bench that threw: one row saying so, so the table still shows every figure. */
export const failedFigure = (figure: string, target: string, err: unknown): Figure => ({
  figure,
  target,
  measured: `failed: ${(err as Error)?.message ?? String(err)}`,
  met: null,
});
