/**
 * The push notification config methods' params, checked (spec §4.3.3; notes A5). 1.0:
 * `TaskPushNotificationConfig` `{taskId, id?, url, token?, authentication?: {scheme, credentials}}`
 * (Create), `{taskId, id}` (Get, Delete), `{taskId}` (List); inline in SendMessage as
 * `configuration.taskPushNotificationConfig`. 0.3: `{taskId, pushNotificationConfig: {id?, url,
 * token?, authentication?: {schemes[], credentials?}}}` (set), `{id, pushNotificationConfigId?}`
 * (get, delete), `{id}` (list); inline as `configuration.pushNotificationConfig`.
 */
import { z } from 'zod';
import type { Dialect } from './dialect.js';
import { invalidParams } from './errors.js';

/** A config as the client asked for it, either wire. */
export interface PushConfigInput {
  /** null: the client named none (the task id is used, as `@a2a-js/sdk`'s server does). */
  id: string | null;
  url: string;
  token: string | null;
  authentication: { scheme: string; credentials: string } | null;
}

const id = z.string().max(128);
const taskId = z.string().min(1).max(512);
const url = z.string().min(1).max(2048);
const token = z.string().max(4096);
const credentials = z.string().max(8192);
const scheme = z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$/, 'must be an HTTP auth scheme name');

const config10 = z
  .object({
    id: id.optional(),
    url,
    token: token.optional(),
    authentication: z.object({ scheme, credentials: credentials.optional() }).passthrough().optional(),
  })
  .passthrough();
const config03 = z
  .object({
    id: id.optional(),
    url,
    token: token.optional(),
    authentication: z
      .object({ schemes: z.array(scheme).min(1), credentials: credentials.optional() })
      .passthrough()
      .optional(),
  })
  .passthrough();

const issueText = (error: z.ZodError, prefix: string): string => {
  const issue = error.issues[0];
  const path = [prefix, ...(issue?.path ?? [])].filter((p) => p !== '').join('.');
  return issue ? `${path || 'params'}: ${issue.message}` : 'invalid params';
};

const parse = <T>(schema: z.ZodType<T>, value: unknown, prefix: string): T => {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw invalidParams(issueText(parsed.error, prefix));
  return parsed.data;
};

const nonEmpty = (v: string | undefined): string | null => (v === undefined || v === '' ? null : v);

/** One config object of either wire (`prefix`: where it sits in the params, for error messages). */
export const parsePushConfig = (raw: unknown, dialect: Dialect, prefix: string): PushConfigInput => {
  if (dialect === '1.0') {
    const c = parse(config10, raw, prefix);
    return {
      id: nonEmpty(c.id),
      url: c.url,
      token: nonEmpty(c.token),
      authentication: c.authentication
        ? { scheme: c.authentication.scheme, credentials: c.authentication.credentials ?? '' }
        : null,
    };
  }
  const c = parse(config03, raw, prefix);
  return {
    id: nonEmpty(c.id),
    url: c.url,
    token: nonEmpty(c.token),
    authentication: c.authentication
      ? { scheme: c.authentication.schemes[0]!, credentials: c.authentication.credentials ?? '' }
      : null,
  };
};

/** Where the config URL sits in a dialect's params (named by an SSRF refusal). */
export const urlField = (dialect: Dialect, inline: boolean): string =>
  dialect === '1.0'
    ? inline
      ? 'configuration.taskPushNotificationConfig.url'
      : 'url'
    : inline
      ? 'configuration.pushNotificationConfig.url'
      : 'pushNotificationConfig.url';

/** Create (1.0) / set (0.3). */
export const parseCreate = (
  params: Record<string, unknown>,
  dialect: Dialect,
): { taskId: string; config: PushConfigInput } => {
  if (dialect === '1.0') {
    const { taskId: t } = parse(z.object({ taskId }).passthrough(), params, '');
    return { taskId: t, config: parsePushConfig(params, dialect, '') };
  }
  const p = parse(z.object({ taskId, pushNotificationConfig: z.unknown() }).passthrough(), params, '');
  return {
    taskId: p.taskId,
    config: parsePushConfig(p.pushNotificationConfig, dialect, 'pushNotificationConfig'),
  };
};

/** Get and Delete: the task and the config id (0.3 get may leave it out: the task's first config). */
export const parseConfigRef = (
  params: Record<string, unknown>,
  dialect: Dialect,
  idRequired: boolean,
): { taskId: string; id: string | null } => {
  if (dialect === '1.0') {
    const p = parse(
      z.object({ taskId, id: idRequired ? id.min(1) : id.optional() }).passthrough(),
      params,
      '',
    );
    return { taskId: p.taskId, id: nonEmpty(p.id) };
  }
  const p = parse(
    z
      .object({
        id: taskId,
        pushNotificationConfigId: idRequired ? id.min(1) : id.optional(),
      })
      .passthrough(),
    params,
    '',
  );
  return { taskId: p.id, id: nonEmpty(p.pushNotificationConfigId) };
};

/** List: the task. */
export const parseListParams = (params: Record<string, unknown>, dialect: Dialect): { taskId: string } => {
  if (dialect === '1.0') return parse(z.object({ taskId }).passthrough(), params, '');
  return { taskId: parse(z.object({ id: taskId }).passthrough(), params, '').id };
};
