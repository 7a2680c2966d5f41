/**
 * The process logger. Secrets (door tokens, API keys, Authorization headers) are redacted by path.
 * `json` writes pino's one object per line (for collectors); `pretty` writes one readable line per
 * entry (for a person at a terminal): time, level, message, then the other fields as key=value.
 */
import { Writable } from 'node:stream';
import { pino, type Logger, type LevelWithSilent } from 'pino';

const REDACT_PATHS = [
  'doorToken',
  '*.doorToken',
  'capsules[*].doorToken',
  'authorization',
  '*.authorization',
  'headers.authorization',
  '*.headers.authorization',
  'token',
  '*.token',
];

export const LOG_FORMATS = ['pretty', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

const LEVEL_NAMES: Record<number, string> = {
  10: 'TRACE',
  20: 'DEBUG',
  30: 'INFO',
  40: 'WARN',
  50: 'ERROR',
  60: 'FATAL',
};
/** ANSI colours per level, used only when the output is a terminal and NO_COLOR is unset. */
const LEVEL_COLOURS: Record<number, string> = { 10: '90', 20: '36', 30: '32', 40: '33', 50: '31', 60: '35' };
/** Fields every line carries or shows in its own place. */
const OMITTED = new Set(['level', 'time', 'msg', 'pid', 'hostname', 'service']);

const clock = (ms: number): string => new Date(ms).toISOString().slice(11, 23);

const fieldValue = (value: unknown): string => {
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  if (value !== null && typeof value === 'object' && 'message' in value && 'type' in value) {
    // A serialized error: its message here, its stack on the following lines.
    return JSON.stringify((value as { message: unknown }).message);
  }
  return JSON.stringify(value) ?? String(value);
};

/** One pino JSON line → `12:00:00.123 INFO  message key=value …` (and an error's stack below it). */
export const prettyLine = (json: string, colour = false): string => {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const level = typeof entry.level === 'number' ? entry.level : 30;
  const name = (LEVEL_NAMES[level] ?? String(level)).padEnd(5);
  const shown = colour ? `\u001b[${LEVEL_COLOURS[level] ?? '0'}m${name}\u001b[0m` : name;
  const time = typeof entry.time === 'number' ? clock(entry.time) : '';
  const fields: string[] = [];
  let stack = '';
  for (const [key, value] of Object.entries(entry)) {
    if (OMITTED.has(key) || value === undefined) continue;
    fields.push(`${key}=${fieldValue(value)}`);
    const s = (value as { stack?: unknown } | null)?.stack;
    if (typeof s === 'string' && !stack) stack = `\n    ${s.split('\n').join('\n    ')}`;
  }
  const msg = typeof entry.msg === 'string' ? entry.msg : '';
  return `${[time, shown, msg, ...fields].filter((p) => p !== '').join(' ')}${stack}\n`;
};

/** A stream pino writes JSON lines to, which writes them pretty to `out`. */
const prettyStream = (out: NodeJS.WritableStream & { isTTY?: boolean }): Writable => {
  const colour = out.isTTY === true && !process.env.NO_COLOR;
  let partial = '';
  return new Writable({
    write(chunk: Buffer, _encoding, done) {
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) if (line !== '') out.write(prettyLine(line, colour));
      done();
    },
  });
};

export const createLogger = (
  level: LevelWithSilent = 'info',
  format: LogFormat = 'json',
  out: NodeJS.WritableStream & { isTTY?: boolean } = process.stdout,
): Logger => {
  const options = {
    level,
    base: { service: 'murmur-gateway' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
  };
  if (format === 'pretty') return pino(options, prettyStream(out));
  return out === process.stdout ? pino(options) : pino(options, out);
};
