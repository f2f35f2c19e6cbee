/**
 * Plain SVG bar charts (grouped bars, value labels, an optional target line), written to
 * `bench/charts/*.svg` and linked from RESULTS.md. No external services, no dependencies.
 */

/** One series of a grouped bar chart: one value per category (NaN = no bar). */
export interface BarSeries {
  readonly name: string;
  readonly values: readonly number[];
}

/** A grouped bar chart. */
export interface BarChart {
  /** File stem: `<file>.svg`. */
  readonly file: string;
  readonly title: string;
  /** Unit of the y axis (`req/s`, `ms`). */
  readonly unit: string;
  /** Categories along the x axis. */
  readonly categories: readonly string[];
  readonly series: readonly BarSeries[];
  /** A horizontal reference line (a target). */
  readonly line?: { readonly value: number; readonly label: string };
}

const COLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#b07aa1'];
const W = 720;
const H = 400;
const PAD = { left: 70, right: 20, top: 48, bottom: 100 };

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** A "nice" axis maximum (1, 2, 2.5, 5 × 10^k) at or above `v`. */
function niceMax(v: number): number {
  if (!(v > 0)) return 1;
  const exp = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * exp >= v) return m * exp;
  return 10 * exp;
}

function label(v: number): string {
  if (!Number.isFinite(v)) return '';
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a >= 1000) return v.toFixed(0);
  if (a >= 100) return v.toFixed(1);
  if (a >= 1) return v.toFixed(2);
  return v.toFixed(3);
}

/** Renders `chart` as a standalone SVG document. */
export function renderBarChart(chart: BarChart): string {
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const values = chart.series.flatMap((s) => s.values.filter((v) => Number.isFinite(v)));
  const top = niceMax(Math.max(0, ...values, chart.line?.value ?? 0) * 1.1);
  const y = (v: number): number => PAD.top + plotH - (Math.max(0, v) / top) * plotH;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${W}" height="${H}" fill="#ffffff"/>`);
  out.push(`<text x="${W / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">${esc(chart.title)}</text>`);
  for (let i = 0; i <= 5; i++) {
    const v = (top / 5) * i;
    const yy = y(v);
    out.push(`<line x1="${PAD.left}" y1="${yy}" x2="${W - PAD.right}" y2="${yy}" stroke="#e0e0e0"/>`);
    out.push(`<text x="${PAD.left - 6}" y="${yy + 4}" text-anchor="end" fill="#444">${label(v)}</text>`);
  }
  out.push(
    `<text x="16" y="${PAD.top + plotH / 2}" transform="rotate(-90 16 ${PAD.top + plotH / 2})" text-anchor="middle" fill="#444">${esc(chart.unit)}</text>`,
  );
  const groupW = plotW / Math.max(1, chart.categories.length);
  const n = Math.max(1, chart.series.length);
  const barW = Math.min(60, (groupW * 0.8) / n);
  // Long category names would overlap: tilt them (about 7 px per character at 12 px).
  const tilt = Math.max(0, ...chart.categories.map((c) => c.length)) * 7 > groupW;
  chart.categories.forEach((cat, ci) => {
    const gx = PAD.left + groupW * ci + (groupW - barW * n) / 2;
    chart.series.forEach((s, si) => {
      const v = s.values[ci] ?? NaN;
      const x = gx + barW * si;
      if (!Number.isFinite(v)) {
        out.push(`<text x="${x + barW / 2}" y="${y(0) - 4}" text-anchor="middle" fill="#999">n/a</text>`);
        return;
      }
      const yy = y(v);
      const color = COLORS[si % COLORS.length] ?? '#888';
      out.push(
        `<rect x="${x.toFixed(1)}" y="${yy.toFixed(1)}" width="${(barW - 2).toFixed(1)}" height="${(y(0) - yy).toFixed(1)}" fill="${color}"><title>${esc(`${s.name} ${cat}: ${label(v)} ${chart.unit}`)}</title></rect>`,
      );
      out.push(`<text x="${(x + barW / 2 - 1).toFixed(1)}" y="${(yy - 4).toFixed(1)}" text-anchor="middle" font-size="10">${label(v)}</text>`);
    });
    const cx = PAD.left + groupW * ci + groupW / 2;
    const cy = PAD.top + plotH + 18;
    out.push(
      tilt
        ? `<text x="${cx}" y="${cy}" text-anchor="end" transform="rotate(-25 ${cx} ${cy})">${esc(cat)}</text>`
        : `<text x="${cx}" y="${cy}" text-anchor="middle">${esc(cat)}</text>`,
    );
  });
  out.push(`<line x1="${PAD.left}" y1="${y(0)}" x2="${W - PAD.right}" y2="${y(0)}" stroke="#333"/>`);
  if (chart.line !== undefined) {
    const yy = y(chart.line.value);
    out.push(`<line x1="${PAD.left}" y1="${yy}" x2="${W - PAD.right}" y2="${yy}" stroke="#d62728" stroke-dasharray="6 4"/>`);
    out.push(`<text x="${W - PAD.right}" y="${yy - 5}" text-anchor="end" fill="#d62728">${esc(chart.line.label)}</text>`);
  }
  if (chart.series.length > 1) {
    chart.series.forEach((s, si) => {
      const lx = PAD.left + si * 150;
      const ly = H - 12;
      out.push(`<rect x="${lx}" y="${ly - 10}" width="12" height="12" fill="${COLORS[si % COLORS.length] ?? '#888'}"/>`);
      out.push(`<text x="${lx + 18}" y="${ly}">${esc(s.name)}</text>`);
    });
  }
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
