/**
 * A log record as JSON: the record object `GET /murmur/{c}/poll` returns, which the Durable Streams
 * capsule streams serve as their messages too (one shape of a record wherever it is read as JSON).
 * Each record is serialised once and cached, since one batch answers every reader.
 */
import { receivedIso as iso, type LogRecord } from '../log/record.js';

const snake = (key: string): string => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** One record as the long-poll shows it (see adapters/murmur/poll.ts for the documented shape). */
export const recordJson = (record: LogRecord): Record<string, unknown> => {
  switch (record.kind) {
    case 'frame':
      return {
        offset: record.offset,
        kind: 'frame',
        event: record.event,
        id: record.upstreamId,
        data: record.data,
        received_at: iso(record.receivedAt),
      };
    case 'submission': {
      const json: Record<string, unknown> = {
        offset: record.offset,
        kind: 'submission',
        protocol: record.protocol,
        owner: record.owner,
        context_id: record.contextId,
        message_id: record.messageId,
        text: record.text,
      };
      if (record.meta !== undefined) json.meta = record.meta;
      json.received_at = iso(record.receivedAt);
      return json;
    }
    case 'fact': {
      // Facts differ in their fields (ack, attempt, reason, count, firstAvailableId): all in snake_case.
      const json: Record<string, unknown> = { offset: record.offset, kind: 'fact' };
      for (const [key, value] of Object.entries(record)) {
        if (key === 'offset' || key === 'kind' || key === 'receivedAt' || value === undefined) continue;
        json[snake(key)] = value;
      }
      json.received_at = iso(record.receivedAt);
      return json;
    }
  }
};

const encoded = new WeakMap<LogRecord, string>();

/** A record's JSON text, computed once per record object. */
export const recordText = (record: LogRecord): string => {
  let text = encoded.get(record);
  if (text === undefined) {
    text = JSON.stringify(recordJson(record));
    encoded.set(record, text);
  }
  return text;
};
