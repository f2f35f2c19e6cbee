import { pino, type Logger, type DestinationStream } from 'pino';
import type { LogFormat } from '../../config/router-config.js';

export type AppLogger = Logger;

/** Paths never written to a log line (STYLE §9). */
export const REDACT_PATHS = ['authorization', 'req.headers.authorization', 'headers.authorization', 'token', 'adminToken', 'identity'];

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

/** Human-readable lines for a terminal: `12:00:01.123 INFO  msg key=value ...`. */
function prettyStream(out: NodeJS.WritableStream): DestinationStream {
  return {
    write(line: string): void {
      let rec: Record<string, unknown>;
      try {
        rec = JSON.parse(line) as Record<string, unknown>;
      } catch {
        out.write(line);
        return;
      }
      const { time, level, msg, hostname: _h, ...rest } = rec;
      const t = new Date(typeof time === 'number' ? time : Date.now()).toISOString().slice(11, 23);
      const lv = (LEVEL_NAMES[typeof level === 'number' ? level : 30] ?? String(level)).padEnd(5);
      const kv = Object.entries(rest)
        .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
        .join(' ');
      out.write(`${t} ${lv} ${typeof msg === 'string' ? msg : ''}${kv ? ' ' + kv : ''}\n`);
    },
  };
}

export function createAppLogger(level: string, format: LogFormat, out: NodeJS.WritableStream = process.stdout): AppLogger {
  const opts = { level, base: undefined, redact: { paths: REDACT_PATHS, censor: '[redacted]' } };
  return format === 'pretty' ? pino(opts, prettyStream(out)) : pino(opts, out as DestinationStream);
}
