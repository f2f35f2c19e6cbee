/** A small Prometheus text-format reader and linter for tests (promtool-style checks). */
export interface Sample {
  readonly name: string;
  readonly labels: Record<string, string>;
  readonly value: number;
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;

export function parseProm(text: string): { samples: Sample[]; problems: string[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const problems: string[] = [];
  const help = new Set<string>();
  const types = new Map<string, string>();
  const seen = new Set<string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('# HELP ')) {
      const name = line.split(' ')[2];
      if (help.has(name)) problems.push(`duplicate HELP for ${name}`);
      help.add(name);
      continue;
    }
    if (line.startsWith('# TYPE ')) {
      const [, , name, type] = line.split(' ');
      if (types.has(name)) problems.push(`duplicate TYPE for ${name}`);
      types.set(name, type);
      continue;
    }
    if (line.startsWith('#')) continue;
    const m = /^([^{\s]+)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/.exec(line);
    if (m === null) {
      problems.push(`unparsable line: ${line}`);
      continue;
    }
    const [, name, rawLabels, value] = m;
    if (!NAME.test(name)) problems.push(`bad metric name ${name}`);
    const labels: Record<string, string> = {};
    const labelText = rawLabels ?? '';
    let consumed = 0;
    for (const lm of labelText.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/g)) {
      if (lm.index !== consumed) break;
      if (lm[1].startsWith('__')) problems.push(`reserved label name ${lm[1]} on ${name}`);
      if (lm[1] in labels) problems.push(`label ${lm[1]} twice on ${name}`);
      labels[lm[1]] = lm[2]!;
      consumed = lm.index + lm[0].length;
    }
    if (consumed !== labelText.length) problems.push(`malformed labels: ${line}`);
    if (!/^(?:[+-]?(?:\d+\.?\d*(?:e[+-]?\d+)?|\.\d+)|[+-]Inf|NaN)$/i.test(value)) problems.push(`bad value ${value} on ${name}`);
    const key = `${name}{${Object.entries(labels)
      .sort()
      .map(([k, v]) => `${k}=${v}`)
      .join(',')}}`;
    if (seen.has(key)) problems.push(`duplicate series ${key}`);
    seen.add(key);
    const family = name.replace(/_(bucket|sum|count|total|created)$/, '');
    const type = types.get(name) ?? types.get(family) ?? types.get(name.replace(/_(bucket|sum|count)$/, ''));
    // TYPE must come before the family's first sample, as the text format requires.
    if (type === undefined) problems.push(`no TYPE before ${name}`);
    if (type === 'counter' && !name.endsWith('_total') && !name.endsWith('_created')) problems.push(`counter ${name} does not end in _total`);
    if (type === 'histogram' && name.endsWith('_bucket') && labels['le'] === undefined) problems.push(`bucket of ${name} without le`);
    if (!help.has(name) && !help.has(family) && !help.has(name.replace(/_(bucket|sum|count)$/, ''))) problems.push(`no HELP for ${name}`);
    samples.push({ name: name, labels, value: Number(value) });
  }
  return { samples, problems, types };
}

/** Sum of the samples of `name` whose labels include `match`. */
export function sum(samples: readonly Sample[], name: string, match: Record<string, string> = {}): number {
  return samples.filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v)).reduce((n, s) => n + s.value, 0);
}
