/** The process logger. Secrets (door tokens, API keys, Authorization headers) are redacted by path. */
import { pino, type Logger, type LevelWithSilent } from 'pino';

export const REDACT_PATHS = [
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

export const createLogger = (level: LevelWithSilent = 'info'): Logger =>
  pino({ level, base: { service: 'murmur-gateway' }, redact: { paths: REDACT_PATHS, censor: '[redacted]' } });
