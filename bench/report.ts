/** One measured figure, printed next to its limit measured or fixed in the same run. */
export interface Figure {
  name: string;
  value: string;
  limit: string;
  /** null when the figure is informational (no budget). */
  withinLimit: boolean | null;
}

export interface BenchSection {
  title: string;
  /** How the figures were produced (what was compared with what). */
  method: string;
  figures: Figure[];
}

export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] as number;
}

export function ms(v: number, digits = 3): string {
  return `${v.toFixed(digits)} ms`;
}

export function renderSection(s: BenchSection): string {
  const rows = s.figures.map((f) => `| ${f.name} | ${f.value} | ${f.limit} | ${f.withinLimit === null ? '' : f.withinLimit ? 'yes' : '**no**'} |`);
  return [`### ${s.title}`, '', s.method, '', '| figure | measured | limit | within |', '| --- | --- | --- | --- |', ...rows, ''].join('\n');
}
