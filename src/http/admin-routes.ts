/**
 * The admin API: the fleet's capsule registry over HTTP (`/admin/capsules[/{id}]`), behind the admin
 * token. Errors use the ops grammar `{error: {code, message}}`. Door tokens go in, never out. With
 * no admin token configured every /admin/ route answers 404: an API nobody can use is not offered.
 */
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { z } from 'zod';
import type { AdminTokenCheck } from '../auth/admin-token.js';
import { may, principalOf } from '../auth/principal.js';
import { CAPSULE_ID } from '../config/schema.js';
import type { CapsuleEntry, CapsuleRegistry } from '../fleet/registry.js';

/** Admin bodies are two short strings; anything larger is not one. */
const ADMIN_BODY_LIMIT = 16 * 1024;

export interface AdminDeps {
  registry: CapsuleRegistry;
  token: AdminTokenCheck;
}

const isHttpUrl = (u: string): boolean => {
  try {
    const { protocol, hostname } = new URL(u);
    return (protocol === 'http:' || protocol === 'https:') && hostname !== '';
  } catch {
    return false;
  }
};

const putBody = z
  .object({
    url: z.string({ error: 'must be a string' }).refine(isHttpUrl, 'must be an http:// or https:// URL'),
    doorToken: z.string({ error: 'must be a string' }).min(1, 'must not be empty').optional(),
  })
  .strict();

type ErrorStatus = 400 | 401 | 403 | 404 | 405 | 413 | 415 | 503;

const fail = (
  c: Context,
  status: ErrorStatus,
  code: string,
  message: string,
  headers?: Record<string, string>,
) => c.json({ error: { code, message } }, status, headers);

const view = (id: string, e: CapsuleEntry) => ({
  id,
  url: e.url,
  hasDoorToken: e.doorToken !== undefined,
  source: e.source,
  updated_at: new Date(e.updatedAt).toISOString(),
});

/** The registry is in Redis: when it cannot answer, say so rather than 500. */
const unavailable = (c: Context) => fail(c, 503, 'store_unavailable', 'the capsule registry is unreachable');

const describeIssue = (issue: z.core.$ZodIssue): string => {
  if (issue.code === 'unrecognized_keys')
    return `unknown field ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
  const field = issue.path.map(String).join('.');
  return field ? `${field}: ${issue.message}` : issue.message;
};

export const createAdminRoutes = (deps: AdminDeps): Hono => {
  const app = new Hono();

  app.use('/admin/*', async (c, next) => {
    // A key or JWT with the `admin` scope is as good as the admin token (never the open principal:
    // a gateway without auth keeps its admin API behind the token).
    const p = principalOf(c);
    const credentialed = p.kind === 'key' || p.kind === 'jwt';
    if (credentialed && may(p, 'admin')) return next();
    const authorization = c.req.header('authorization');
    if (credentialed && !deps.token.accepts(authorization))
      return fail(c, 403, 'forbidden', 'this credential lacks the "admin" scope');
    if (!deps.token.enabled) {
      return fail(c, 404, 'not_found', 'the admin API is disabled: no admin token is configured');
    }
    if (!deps.token.accepts(authorization)) {
      const challenge =
        authorization === undefined
          ? 'Bearer realm="murmur-gateway admin"'
          : 'Bearer realm="murmur-gateway admin", error="invalid_token"';
      return fail(c, 401, 'unauthorized', 'a valid admin token is required (Authorization: Bearer …)', {
        'WWW-Authenticate': challenge,
      });
    }
    return next();
  });

  const withId = (c: Context): string | null => {
    const id = c.req.param('id') ?? '';
    return CAPSULE_ID.test(id) ? id : null;
  };
  const badId = (c: Context) =>
    fail(c, 400, 'invalid_capsule_id', 'capsule ids match [A-Za-z0-9][A-Za-z0-9._-]{0,63}');

  app.get('/admin/capsules', async (c) => {
    const entries = await deps.registry.list().catch(() => null);
    if (!entries) return unavailable(c);
    return c.json({ capsules: [...entries].map(([id, e]) => view(id, e)) });
  });

  app.get('/admin/capsules/:id', async (c) => {
    const id = withId(c);
    if (!id) return badId(c);
    const entry = await deps.registry.get(id).catch(() => undefined);
    if (entry === undefined) return unavailable(c);
    if (!entry) return fail(c, 404, 'capsule_not_found', `no capsule "${id}" in the registry`);
    return c.json(view(id, entry));
  });

  app.put(
    '/admin/capsules/:id',
    bodyLimit({
      maxSize: ADMIN_BODY_LIMIT,
      onError: (c) => fail(c, 413, 'payload_too_large', `the body exceeds ${ADMIN_BODY_LIMIT} bytes`),
    }),
    async (c) => {
      const id = withId(c);
      if (!id) return badId(c);
      const type = (c.req.header('content-type') ?? '').split(';')[0]!.trim().toLowerCase();
      if (type !== 'application/json') {
        return fail(c, 415, 'unsupported_media_type', 'the body must be application/json');
      }
      let json: unknown;
      try {
        json = JSON.parse(await c.req.text());
      } catch {
        return fail(c, 400, 'invalid_json', 'the body is not valid JSON');
      }
      const parsed = putBody.safeParse(json);
      if (!parsed.success) {
        return fail(c, 400, 'invalid_body', parsed.error.issues.map(describeIssue).join('; '));
      }
      const entry: CapsuleEntry = {
        url: parsed.data.url,
        ...(parsed.data.doorToken !== undefined ? { doorToken: parsed.data.doorToken } : {}),
        source: 'admin',
        updatedAt: Date.now(),
      };
      const result = await deps.registry.put(id, entry).catch(() => null);
      if (!result) return unavailable(c);
      return c.json(view(id, entry), result.created ? 201 : 200);
    },
  );

  app.delete('/admin/capsules/:id', async (c) => {
    const id = withId(c);
    if (!id) return badId(c);
    const removed = await deps.registry.remove(id).catch(() => null);
    if (removed === null) return unavailable(c);
    if (!removed) return fail(c, 404, 'capsule_not_found', `no capsule "${id}" in the registry`);
    return c.body(null, 204);
  });

  // Anything else under /admin/capsules: a known path with a method it does not allow.
  app.all('/admin/capsules', (c) =>
    fail(c, 405, 'method_not_allowed', `${c.req.method} is not allowed here`, { Allow: 'GET' }),
  );
  app.all('/admin/capsules/:id', (c) =>
    fail(c, 405, 'method_not_allowed', `${c.req.method} is not allowed here`, { Allow: 'GET, PUT, DELETE' }),
  );
  app.all('/admin/*', (c) => fail(c, 404, 'not_found', `no route for ${c.req.method} ${c.req.path}`));

  return app;
};
