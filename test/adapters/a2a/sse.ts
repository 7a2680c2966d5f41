/** Read an SSE answer to its end: each event's `id:` and its `data:` parsed. */
export interface SseEvent {
  id: string | null;
  data: unknown;
}

export const sseEvents = async (res: Response): Promise<SseEvent[]> => {
  const text = await res.text();
  const events: SseEvent[] = [];
  for (const block of text.split('\n\n')) {
    let id: string | null = null;
    let data: string | null = null;
    for (const line of block.split('\n')) {
      if (line.startsWith('id: ')) id = line.slice(4);
      else if (line.startsWith('data: ')) data = line.slice(6);
    }
    if (data !== null) events.push({ id, data: JSON.parse(data) as unknown });
  }
  return events;
};
