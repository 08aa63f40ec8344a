import { useEffect, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { useColorScheme } from '../hooks/use-color-scheme.js';

export interface ChartSeries {
  label: string;
  /** A CSS custom property holding the colour (so the theme decides). */
  colorVar: string;
  values: readonly number[];
}

interface TimeChartProps {
  title: string;
  /** Unix seconds. */
  time: readonly number[];
  series: readonly ChartSeries[];
  format(value: number): string;
  height?: number;
}

function cssVar(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || '#888';
}

/**
 * One uPlot time-series chart. The plot is built once per colour scheme and series layout,
 * then fed new data with setData (no rebuild per update); it follows its container's width.
 */
export function TimeChart({ title, time, series, format, height = 180 }: TimeChartProps) {
  const holder = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const scheme = useColorScheme();
  const layout = series.map((s) => `${s.label}:${s.colorVar}`).join('|');
  const formatRef = useRef(format);
  formatRef.current = format;
  const data: uPlot.AlignedData = [time as number[], ...series.map((s) => s.values as number[])];
  const dataRef = useRef(data);
  dataRef.current = data;

  useEffect(() => {
    const el = holder.current;
    if (el === null) return;
    const axis = cssVar('--text-muted');
    const grid = cssVar('--grid');
    const opts: uPlot.Options = {
      width: Math.max(200, el.clientWidth),
      height,
      series: [
        {},
        ...series.map((s) => ({
          label: s.label,
          stroke: cssVar(s.colorVar),
          width: 1.5,
          points: { show: false },
          value: (_u: uPlot, v: number | null) => (v === null ? '–' : formatRef.current(v)),
        })),
      ],
      axes: [
        { stroke: axis, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } },
        {
          stroke: axis,
          size: 90,
          grid: { stroke: grid, width: 1 },
          ticks: { stroke: grid, width: 1 },
          values: (_u: uPlot, vals: number[]) => vals.map((v) => formatRef.current(v)),
        },
      ],
      scales: { x: { time: true }, y: { range: (_u, min, max) => [Math.min(0, min), max > 0 ? max * 1.1 : 1] } },
      cursor: { drag: { x: true, y: false } },
      legend: { live: true },
    };
    const u = new uPlot(opts, dataRef.current, el);
    plot.current = u;
    let frame = 0;
    let width = el.clientWidth;
    const ro = new ResizeObserver(() => {
      cancelAnimationFrame(frame);
      frame = requestAnimationFrame(() => {
        if (el.clientWidth !== width && el.clientWidth > 0) {
          width = el.clientWidth;
          u.setSize({ width: Math.max(200, width), height });
        }
      });
    });
    ro.observe(el);
    return () => {
      cancelAnimationFrame(frame);
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
    // `series` content is tracked through `layout`; data goes through setData below.
  }, [scheme, layout, height]);

  useEffect(() => {
    plot.current?.setData(data);
  });

  return (
    <figure className="chart">
      <figcaption className="chart-title">{title}</figcaption>
      <div ref={holder} className="chart-plot" role="img" aria-label={`${title} chart`} />
    </figure>
  );
}
