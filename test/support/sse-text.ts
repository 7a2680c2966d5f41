/** An SSE response's text from its start until `enough(text)` says so (then the request is aborted). */
export const sseTextUntil = async (url: string, enough: (text: string) => boolean): Promise<string> => {
  const ac = new AbortController();
  const res = await fetch(url, { signal: ac.signal });
  let text = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    text += decoder.decode(chunk, { stream: true });
    if (enough(text)) break;
  }
  ac.abort();
  return text;
};

/** The `id:` values of an SSE text, as numbers, in order. */
export const sseIds = (text: string): number[] =>
  [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));
