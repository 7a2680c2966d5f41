/** POST `body` as JSON (the tests' requests to the gateway's JSON routes). */
export const postJson = (
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
