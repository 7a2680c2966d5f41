/**
 * The one record every layer must recognise: a new epoch's first record. A store that lost records
 * starts a new epoch whose offsets continue above every offset handed out before, opening with this
 * fact, so offsets jump to it and a reader resuming from any older cursor meets it first.
 */
import type { LogRecord } from '../log/record.js';

export const isStoreReset = (record: LogRecord): boolean =>
  record.kind === 'fact' && record.fact === 'frames-possibly-missing' && record.reason === 'store-reset';
