/**
 * Plain SVG line charts over a time axis: stacked panels sharing the x axis, each with its own
 * unit and one polyline per series. For scenarios with a time axis (the step load of (g)); the
 * bar charts of svg.ts draw the rest. No dependencies.
 */

/** One line: points (x = seconds, y = value; NaN y = a gap). */
export interface LineSeries {
  readonly name: string;
  readonly points: ReadonlyArray<readonly [number, number]>;
}

export interface LinePanel {
  readonly title: string;
  readonly unit: string;
  readonly series: readonly LineSeries[];
}

export interface LineChart {
  readonly file: string;
  readonly title: string;
  /** Label of the shared x axis. */
  readonly xLabel: string;
  readonly panels: readonly LinePanel[];
  /** Vertical markers (phase changes), at x seconds. */
  readonly marks?: ReadonlyArray<{ readonly x: number; readonly label: string }>;
}

const COLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759'];
const W = 760;
const PANEL_H = 170;
const PAD = { left: 70, right: 150, top: 40, gap: 34, bottom: 40 };

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

function niceMax(v: number): number {
  if (!(v > 0)) return 1;
  const exp = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * exp >= v) return m * exp;
  return 10 * exp;
}

const num = (v: number): string => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2).replace(/\.?0+$/, ''));

/** Renders `chart` as a standalone SVG document. */
export function renderLineChart(chart: LineChart): string {
  const plotW = W - PAD.left - PAD.right;
  const H = PAD.top + chart.panels.length * (PANEL_H + PAD.gap) + PAD.bottom;
  const xs = chart.panels.flatMap((p) => p.series.flatMap((s) => s.points.map(([x]) => x)));
  const xMax = Math.max(1, ...xs);
  const x = (v: number): number => PAD.left + (v / xMax) * plotW;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${W}" height="${H}" fill="#ffffff"/>`);
  out.push(`<text x="${W / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${esc(chart.title)}</text>`);
  chart.panels.forEach((panel, pi) => {
    const top0 = PAD.top + pi * (PANEL_H + PAD.gap) + 16;
    const plotH = PANEL_H - 16;
    const values = panel.series.flatMap((s) => s.points.map(([, v]) => v).filter((v) => Number.isFinite(v)));
    const top = niceMax(Math.max(0, ...values) * 1.1);
    const y = (v: number): number => top0 + plotH - (Math.max(0, v) / top) * plotH;
    out.push(`<text x="${PAD.left}" y="${top0 - 6}" font-weight="bold">${esc(panel.title)} (${esc(panel.unit)})</text>`);
    for (let i = 0; i <= 4; i++) {
      const v = (top / 4) * i;
      out.push(`<line x1="${PAD.left}" y1="${y(v)}" x2="${PAD.left + plotW}" y2="${y(v)}" stroke="#e0e0e0"/>`);
      out.push(`<text x="${PAD.left - 6}" y="${y(v) + 4}" text-anchor="end" fill="#444">${num(v)}</text>`);
    }
    for (const m of chart.marks ?? []) {
      out.push(`<line x1="${x(m.x)}" y1="${top0}" x2="${x(m.x)}" y2="${top0 + plotH}" stroke="#999" stroke-dasharray="4 3"/>`);
      if (pi === 0) out.push(`<text x="${x(m.x) + 3}" y="${top0 + 12}" fill="#666">${esc(m.label)}</text>`);
    }
    panel.series.forEach((s, si) => {
      const color = COLORS[si % COLORS.length];
      // Split at NaN values so a gap is drawn as a gap.
      let run: string[] = [];
      const flush = (): void => {
        if (run.length > 0) out.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${run.join(' ')}"/>`);
        run = [];
      };
      for (const [px, py] of s.points) {
        if (Number.isFinite(py)) run.push(`${x(px).toFixed(1)},${y(py).toFixed(1)}`);
        else flush();
      }
      flush();
      const ly = top0 + 14 + si * 16;
      out.push(`<line x1="${PAD.left + plotW + 10}" y1="${ly - 4}" x2="${PAD.left + plotW + 28}" y2="${ly - 4}" stroke="${color}" stroke-width="3"/>`);
      out.push(`<text x="${PAD.left + plotW + 32}" y="${ly}">${esc(s.name)}</text>`);
    });
  });
  const axisY = H - PAD.bottom + 4;
  for (let i = 0; i <= 6; i++) {
    const v = (xMax / 6) * i;
    out.push(`<text x="${x(v)}" y="${axisY + 12}" text-anchor="middle" fill="#444">${num(v)}</text>`);
  }
  out.push(`<text x="${PAD.left + plotW / 2}" y="${H - 6}" text-anchor="middle" fill="#444">${esc(chart.xLabel)}</text>`);
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
