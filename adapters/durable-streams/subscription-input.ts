/**
 * The subscription control API's bodies (PROTOCOL.md §6–7), each checked whole before anything is
 * stored: a refused request changes nothing. Messages name the field that is wrong.
 */
import { z } from 'zod';
import type { AckInput, SubscriptionRequest } from '../../src/subscriptions/control.js';
import { validStreamPath } from './stream-path.js';

/** 1 s to 10 min, 30 s when absent (§6). */
const LEASE_TTL = { min: 1_000, max: 600_000, fallback: 30_000 } as const;
const MAX_STREAMS = 1000;
const MAX_ID_LENGTH = 128;

export const validSubscriptionId = (id: string): boolean =>
  id.length > 0 && id.length <= MAX_ID_LENGTH && /^[A-Za-z0-9._~-]+$/.test(id) && id !== '.' && id !== '..';

const streamPath = z.string().refine(validStreamPath, 'is not a stream path');
/** Segments of a path, `*` (one segment) and `**` (any number) among them. */
const pattern = z
  .string()
  .refine(
    (p) => validStreamPath(p) && p.split('/').every((s) => s === '**' || !s.includes('**')),
    'is not a stream path pattern',
  );

const createSchema = z
  .object({
    type: z.enum(['webhook', 'pull-wake']),
    pattern: pattern.optional(),
    streams: z.array(streamPath).max(MAX_STREAMS).optional(),
    webhook: z.object({ url: z.string().max(2048) }).optional(),
    wake_stream: streamPath.optional(),
    lease_ttl_ms: z.number().int().min(LEASE_TTL.min).max(LEASE_TTL.max).optional(),
    description: z.string().max(1024).optional(),
  })
  .superRefine((v, ctx) => {
    if (v.pattern === undefined && (v.streams === undefined || v.streams.length === 0))
      ctx.addIssue({
        code: 'custom',
        path: ['pattern'],
        message: 'a pattern or at least one stream is required',
      });
    if (v.type === 'webhook' && !v.webhook)
      ctx.addIssue({
        code: 'custom',
        path: ['webhook'],
        message: 'a webhook subscription needs webhook.url',
      });
    if (v.type === 'webhook' && v.wake_stream !== undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['wake_stream'],
        message: 'only a pull-wake subscription has a wake stream',
      });
    if (v.type === 'pull-wake' && v.wake_stream === undefined)
      ctx.addIssue({
        code: 'custom',
        path: ['wake_stream'],
        message: 'a pull-wake subscription needs wake_stream',
      });
    if (v.type === 'pull-wake' && v.webhook)
      ctx.addIssue({
        code: 'custom',
        path: ['webhook'],
        message: 'only a webhook subscription has a webhook',
      });
  });

const streamsSchema = z.object({ streams: z.array(streamPath).min(1).max(MAX_STREAMS) });

const ackSchema = z.object({
  wake_id: z.string().min(1).max(256),
  generation: z.number().int().min(1),
  acks: z
    .array(z.object({ stream: z.string().min(1).max(1024), offset: z.string().min(1).max(64) }))
    .max(MAX_STREAMS)
    .default([]),
  done: z.boolean().default(false),
});

const releaseSchema = z.object({ wake_id: z.string().min(1).max(256), generation: z.number().int().min(1) });
const claimSchema = z.object({ worker: z.string().min(1).max(256) });

export type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

/** The body as JSON; `undefined` when it is not. */
const jsonOf = (text: string): unknown => {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
};

const parseWith = <S extends z.ZodType, T>(
  schema: S,
  text: string,
  map: (v: z.output<S>) => T,
): Parsed<T> => {
  const json = jsonOf(text);
  if (json === undefined) return { ok: false, message: 'the body is not JSON' };
  const result = schema.safeParse(json);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const where = issue.path.length > 0 ? issue.path.join('.') : 'body';
    return { ok: false, message: `${where}: ${issue.message}` };
  }
  return { ok: true, value: map(result.data) };
};

export const parseSubscription = (text: string): Parsed<SubscriptionRequest> =>
  parseWith(createSchema, text, (v) => ({
    type: v.type,
    pattern: v.pattern ?? null,
    streams: v.streams ?? [],
    webhookUrl: v.webhook?.url ?? null,
    wakeStream: v.wake_stream ?? null,
    leaseTtlMs: v.lease_ttl_ms ?? LEASE_TTL.fallback,
    description: v.description ?? null,
  }));

export const parseStreamsBody = (text: string): Parsed<string[]> =>
  parseWith(streamsSchema, text, (v) => v.streams);

export const parseAck = (text: string): Parsed<AckInput> =>
  parseWith(ackSchema, text, (v) => ({
    wakeId: v.wake_id,
    generation: v.generation,
    acks: v.acks,
    done: v.done,
  }));

export const parseRelease = (text: string): Parsed<{ wakeId: string; generation: number }> =>
  parseWith(releaseSchema, text, (v) => ({ wakeId: v.wake_id, generation: v.generation }));

export const parseClaim = (text: string): Parsed<string> => parseWith(claimSchema, text, (v) => v.worker);
