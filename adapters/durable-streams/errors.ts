/** The capsule stream's error grammar: a JSON `{"error": "…"}` body, never cached. */
export type ProblemStatus = 400 | 401 | 403 | 404 | 405 | 410;

export const STREAM_MESSAGES = {
  notFound: 'no such stream',
  live: 'live must be long-poll or sse',
  readOnly: 'capsule streams are read-only',
  unauthorized: 'unauthorized',
  forbidden: 'forbidden: needs the "observe" scope',
} as const;

export const problem = (
  status: ProblemStatus,
  message: string,
  headers: Record<string, string> = {},
): Response =>
  new Response(JSON.stringify({ error: message }), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...headers },
  });
