import type { Readable } from 'node:stream';

export type LogLine = Record<string, unknown>;

/** Collect a stream of JSON log lines (a line that is not JSON is kept as `{ msg }`). */
export function collectLogLines(stream: Readable): LogLine[] {
  const lines: LogLine[] = [];
  let partial = '';
  stream.on('data', (c: Buffer) => {
    partial += c.toString('utf8');
    let i: number;
    while ((i = partial.indexOf('\n')) >= 0) {
      const line = partial.slice(0, i);
      partial = partial.slice(i + 1);
      try {
        lines.push(JSON.parse(line) as LogLine);
      } catch {
        lines.push({ msg: line });
      }
    }
  });
  return lines;
}
