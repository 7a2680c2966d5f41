/**
 * The gateway's configuration, validated with zod. One schema for the merged result of config file,
 * environment and flags (see load.ts); every field has a default except the capsules to front.
 */
import { z } from 'zod';

/** Capsule ids as the contract fixes them. */
export const CAPSULE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

const isHttpUrl = (u: string): boolean => {
  try {
    const { protocol } = new URL(u);
    return protocol === 'http:' || protocol === 'https:';
  } catch {
    return false;
  }
};

const httpUrl = z.string().refine(isHttpUrl, 'must be an http:// or https:// URL');

export const capsuleSchema = z.object({
  id: z.string().regex(CAPSULE_ID, 'must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}'),
  url: httpUrl,
  /** Door token sent upstream as `Authorization: Bearer …`; never logged, never sent downstream. */
  doorToken: z.string().min(1, 'must not be empty').optional(),
});

const apiKeySchema = z.object({
  sha256: z.string().regex(/^[0-9a-f]{64}$/, 'must be the lowercase hex SHA-256 of the key (64 characters)'),
  owner: z.string().min(1, 'must not be empty'),
});

export const configSchema = z
  .object({
    port: z.number().int().min(0).max(65535).default(8080),
    host: z.string().min(1).default('0.0.0.0'),
    redis: z
      .string()
      .refine((u) => /^rediss?:\/\/.+/.test(u), 'must be a redis:// or rediss:// URL')
      .nullable()
      .default(null),
    publicUrl: httpUrl.nullable().default(null),
    demo: z.boolean().default(false),
    capsules: z.array(capsuleSchema).default([]),
    apiKeys: z.array(apiKeySchema).default([]),
    cors: z.object({ origins: z.array(z.string().min(1)).default([]) }).default({ origins: [] }),
    retention: z
      .object({
        /** Records kept per capsule (0 = unbounded). */
        maxRecords: z.number().int().min(0).default(100_000),
        /** Records older than this are dropped (0 = forever). */
        maxAgeSeconds: z
          .number()
          .int()
          .min(0)
          .default(7 * 24 * 3600),
      })
      .default({ maxRecords: 100_000, maxAgeSeconds: 7 * 24 * 3600 }),
    heartbeatSeconds: z.number().positive().default(15),
    longPollSeconds: z.number().positive().max(300).default(30),
    idleControlSeconds: z.number().positive().default(30),
    bodyLimitBytes: z
      .number()
      .int()
      .positive()
      .default(1024 * 1024),
    /** Records queued per live downstream client before it is disconnected as slow. */
    maxQueuedRecords: z.number().int().positive().default(10_000),
    /** Frames held in memory per capsule while the store is unreachable. */
    maxPendingAppends: z.number().int().positive().default(100_000),
    /** Bytes held in memory per capsule while the store is unreachable (frames and facts). */
    maxPendingBytes: z
      .number()
      .int()
      .positive()
      .default(64 * 1024 * 1024),
    /** How long a submission waits for the store before its client is told the service is unavailable. */
    submitStoreTimeoutSeconds: z.number().positive().max(300).default(5),
    logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  })
  .strict()
  .superRefine((cfg, ctx) => {
    const seen = new Set<string>();
    cfg.capsules.forEach((c, i) => {
      if (seen.has(c.id)) {
        ctx.addIssue({
          code: 'custom',
          path: ['capsules', i, 'id'],
          message: `duplicate capsule id "${c.id}"`,
        });
      }
      seen.add(c.id);
    });
  });

export type GatewayConfig = z.output<typeof configSchema>;
export type GatewayConfigInput = z.input<typeof configSchema>;
export type CapsuleConfig = z.output<typeof capsuleSchema>;
