/**
 * Bundled by esbuild into a test page: the official @flue/sdk in the browser, send → observe → read.
 * `window.runFlue(url)` answers what the page saw, for the test to compare with the gateway's.
 */
import { createFlueClient } from '@flue/sdk';

/** The page's global object (this file is bundled for Chromium; the project's lib has no DOM). */
declare const window: unknown;

const runFlue = async (url: string, live: 'sse' | 'long-poll') => {
  const client = createFlueClient({ url });
  const admission = await client.send({ message: { kind: 'user', body: 'hello from chromium' } });
  const obs = client.observe({ live });
  try {
    // Observe until the submission settles, as seen live by the page.
    const observed = await new Promise<ReturnType<typeof obs.getSnapshot>>((resolve) => {
      const check = (): void => {
        const s = obs.getSnapshot();
        if ((s.conversation?.settlements.length ?? 0) > 0) {
          unsubscribe();
          resolve(s);
        }
      };
      const unsubscribe = obs.subscribe(check);
      check();
    });
    await client.wait(admission);
    const reply = await client.read(admission);
    const history = await client.history();
    return {
      text: reply.text,
      observedMessages: observed.conversation?.messages ?? [],
      historyMessages: history.messages,
      settlements: history.settlements,
    };
  } finally {
    obs.close();
  }
};

(window as unknown as { runFlue: typeof runFlue }).runFlue = runFlue;
