/**
 * The figures the issue-11 scale benches hand to run.ts for its final table: one row per figure,
 * beside its target, with whether it was met (null when it could not be measured here).
 */
export interface Figure {
  figure: string;
  target: string;
  measured: string;
  met: boolean | null;
}

export const summaryRows = (figures: Figure[]): Record<string, string>[] =>
  figures.map((f) => ({
    figure: f.figure,
    target: f.target,
    measured: f.measured,
    'met?': f.met === null ? '–' : f.met ? 'yes' : 'NO',
  }));

export const printSummary = (figures: Figure[]): void => {
  if (figures.length === 0) return;
  console.log('\n# summary (issue 11 targets)');
  console.table(summaryRows(figures));
};
