/**
 * Static browser assets: the client library as one self-contained ES module
 * (`GET /client/murmur-gateway.js`) and the dashboard (`/dashboard/…`, plain files, no build step),
 * which `GET /` redirects to.
 *
 * The module is the one `npm run build` bundled into dist; run from source (tsx, the demo, tests)
 * there is none, so it is bundled once, on first request, with esbuild (a devDependency, present
 * wherever the sources are). Both are served with an ETag; If-None-Match answers 304.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Hono, type Context } from 'hono';

const CLIENT_DIR = fileURLToPath(new URL('../client/', import.meta.url));
const DASHBOARD_DIR = fileURLToPath(new URL('../dashboard/', import.meta.url));
const CLIENT_BUNDLE_NAME = 'murmur-gateway.js';

const TYPES: Record<string, string> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  png: 'image/png',
  svg: 'image/svg+xml',
};

interface Asset {
  body: Uint8Array;
  etag: string;
  type: string;
}

const asset = (body: Uint8Array, name: string): Asset => ({
  body,
  etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`,
  type: TYPES[name.slice(name.lastIndexOf('.') + 1)] ?? 'application/octet-stream',
});

/** The bundled client: the build's file, else an in-memory esbuild bundle of the sources. */
const loadClient = async (): Promise<Asset> => {
  const built = `${CLIENT_DIR}${CLIENT_BUNDLE_NAME}`;
  if (existsSync(built)) return asset(readFileSync(built), CLIENT_BUNDLE_NAME);
  const entry = existsSync(`${CLIENT_DIR}index.ts`) ? `${CLIENT_DIR}index.ts` : `${CLIENT_DIR}index.js`;
  const esbuild = await import('esbuild');
  const out = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    format: 'esm',
    target: 'es2020',
    write: false,
    legalComments: 'none',
  });
  const file = out.outputFiles[0];
  if (!file) throw new Error('client bundle: esbuild produced nothing');
  return asset(file.contents, CLIENT_BUNDLE_NAME);
};

const send = (c: Context, a: Asset, cacheControl: string): Response => {
  const headers = { etag: a.etag, 'cache-control': cacheControl, 'content-type': a.type };
  const match = c.req.header('if-none-match');
  if (match && match.split(',').some((tag) => tag.trim().replace(/^W\//, '') === a.etag))
    return new Response(null, { status: 304, headers });
  return new Response(a.body, { status: 200, headers });
};

/** The dashboard's files, read once: only names that exist there are ever served. */
const loadDashboard = (): Map<string, Asset> => {
  const files = new Map<string, Asset>();
  if (!existsSync(DASHBOARD_DIR)) return files;
  for (const name of readdirSync(DASHBOARD_DIR)) {
    if (!/^[\w.-]+\.(html|js|css|png|svg)$/.test(name)) continue;
    files.set(name, asset(readFileSync(`${DASHBOARD_DIR}${name}`), name));
  }
  return files;
};

export const createStaticRoutes = (): Hono => {
  const app = new Hono();
  let client: Promise<Asset> | null = null;
  const dashboard = loadDashboard();

  app.get(`/client/${CLIENT_BUNDLE_NAME}`, async (c) => {
    client ??= loadClient().catch((err: unknown) => {
      client = null;
      throw err;
    });
    // A day fresh, then revalidated by ETag (the URL is not versioned: an upgrade must show).
    return send(c, await client, 'public, max-age=86400');
  });

  // The root is where a newcomer looks first: the dashboard (not permanent: a page may live here later).
  app.get('/', (c) => c.redirect('/dashboard/', 302));
  app.get('/dashboard', (c) => c.redirect('/dashboard/', 301));
  app.get('/dashboard/:file{[^/]*}', (c) => {
    const name = c.req.param('file') || 'index.html';
    const file = dashboard.get(name);
    if (!file) return c.json({ error: { code: 'not_found', message: 'no such file' } }, 404);
    return send(c, file, 'no-cache');
  });

  return app;
};
