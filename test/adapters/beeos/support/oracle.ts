/**
 * The test oracle of a channel stream: a fresh ChannelProjector (the old per-connection path) over
 * the whole capsule log read from offset 0, and the checks every listener's bytes must pass
 * against it (envelopes past `since`, deltas only when asked, one replay_complete, one end last).
 */
import { expect } from 'vitest';
import { ChannelProjector } from '../../../../adapters/beeos/projection.js';
import type { Envelope, Projected } from '../../../../adapters/beeos/projection.js';
import { beeosMeta } from '../../../../adapters/beeos/records.js';
import type { GatewayCore } from '../../../../src/core/types.js';
import type { LogRecord } from '../../../../src/log/record.js';
import type { SseEvent } from './sse-client.js';

export const readWholeLog = async (core: GatewayCore, capsule: string): Promise<LogRecord[]> => {
  const out: LogRecord[] = [];
  let after = 0;
  for (;;) {
    const page = await core.read(capsule, after, 1000);
    if (page.records.length === 0) return out;
    out.push(...page.records);
    after = page.records[page.records.length - 1]?.offset ?? after;
  }
};

export interface OracleChannel {
  projected: Projected[];
  end: string | null;
}

/** Every envelope of channel `id` as one projector over the whole log sees it, up to its end. */
export const oracleOf = (log: readonly LogRecord[], capsule: string, id: string): OracleChannel => {
  const created = log.find((r) => beeosMeta(r)?.channelId === id && r.kind === 'submission');
  if (!created || created.kind !== 'submission') throw new Error(`no creation record for ${id}`);
  const meta = beeosMeta(created);
  const projector = new ChannelProjector({
    kind: meta?.op === 'task' ? 'task' : 'conversation',
    agentId: capsule,
    contextId: created.contextId,
    owner: created.owner ?? '',
    taskIds: [],
  });
  const projected: Projected[] = [];
  for (const record of log) {
    const step = projector.project(record);
    projected.push(...step.envelopes);
    if (step.end) return { projected, end: step.end };
  }
  return { projected, end: null };
};

export const expectedFor = (o: OracleChannel, since: number, includeDeltas: boolean): Envelope[] =>
  o.projected.filter((p) => p.envelope.offset > since && (includeDeltas || !p.delta)).map((p) => p.envelope);

/** One listener's whole stream against the oracle: same envelopes, each once, controls in place. */
export const expectStreamMatches = (
  events: SseEvent[],
  o: OracleChannel,
  since: number,
  includeDeltas: boolean,
): void => {
  const named = events.filter((e) => !(e.comment !== undefined && e.data === ''));
  const envelopes = named.filter((e) => e.event === 'message').map((e) => JSON.parse(e.data) as Envelope);
  expect(envelopes).toEqual(expectedFor(o, since, includeDeltas));
  expect(named.filter((e) => e.event === 'replay_complete')).toHaveLength(1);
  expect(named.filter((e) => e.event === 'end')).toHaveLength(1);
  expect(named.at(-1)?.event).toBe('end');
  expect(JSON.parse(named.at(-1)?.data ?? '{}')).toEqual({ reason: o.end });
};
