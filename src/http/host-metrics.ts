/**
 * One `/metrics` view of a host that runs several workers (`--workers`): whichever worker a scrape
 * reaches asks the primary, which collects every live worker's own exposition over the cluster's
 * IPC channel and merges them, each sample labelled `worker="<index>"`. A scraper sees the host,
 * not the worker the kernel happened to hand its connection to. Without workers nothing of this runs.
 */
import { randomUUID } from 'node:crypto';

/** Messages between a worker and the primary (node:cluster IPC). */
export type MetricsMessage =
  | { type: 'metrics-request'; id: string }
  | { type: 'metrics-collect'; id: string }
  | { type: 'metrics-part'; id: string; text: string }
  | { type: 'metrics-reply'; id: string; text: string };

export const isMetricsMessage = (m: unknown): m is MetricsMessage =>
  typeof m === 'object' &&
  m !== null &&
  typeof (m as { type?: unknown }).type === 'string' &&
  (m as { type: string }).type.startsWith('metrics-');

/** How long a worker waits for the host view before answering with its own (labelled) one. */
const HOST_VIEW_MS = 3_000;

let localRender: (() => Promise<string>) | null = null;

/** The process's own exposition (the one gateway a worker runs registers it). */
export const registerLocalMetrics = (render: () => Promise<string>): void => {
  localRender = render;
};

const workerIndex = (): string | undefined => process.env.GATEWAY_WORKER;

/** `name{a="b"} 1` → `name{worker="i",a="b"} 1`; comment lines unchanged. */
const labelLine = (line: string, worker: string): string => {
  if (line.startsWith('#') || line.trim() === '') return line;
  const brace = line.indexOf('{');
  const space = line.indexOf(' ');
  if (brace >= 0 && (space < 0 || brace < space)) {
    const close = line.indexOf('}', brace);
    const inner = line.slice(brace + 1, close);
    return `${line.slice(0, brace)}{worker="${worker}"${inner ? `,${inner}` : ''}${line.slice(close)}`;
  }
  return `${line.slice(0, space)}{worker="${worker}"}${line.slice(space)}`;
};

/**
 * Several workers' expositions as one: each metric family once (its HELP and TYPE from the first
 * worker that has it), its samples from every worker, labelled, families in first-seen order.
 */
export const mergeExpositions = (parts: readonly { worker: string; text: string }[]): string => {
  const families = new Map<string, { head: string[]; samples: string[] }>();
  for (const { worker, text } of parts) {
    let current: { head: string[]; samples: string[] } | null = null;
    for (const line of text.split('\n')) {
      if (line.trim() === '') continue;
      const meta = /^# (HELP|TYPE) (\S+)/.exec(line);
      if (meta) {
        const name = meta[2]!;
        let family = families.get(name);
        if (!family) {
          family = { head: [], samples: [] };
          families.set(name, family);
        }
        if (family.head.length < 2 && !family.head.some((h) => h.startsWith(`# ${meta[1]} `)))
          family.head.push(line);
        current = family;
        continue;
      }
      if (line.startsWith('#')) continue;
      if (!current) {
        current = { head: [], samples: [] };
        families.set(`\u0000${families.size}`, current);
      }
      current.samples.push(labelLine(line, worker));
    }
  }
  const out: string[] = [];
  for (const f of families.values()) out.push(...f.head, ...f.samples);
  return `${out.join('\n')}\n`;
};

const pending = new Map<string, (text: string) => void>();
let listening = false;

/** In a worker: answer the primary's collection requests, and take its replies. */
const listen = (): void => {
  if (listening || !process.send) return;
  listening = true;
  process.on('message', (m: unknown) => {
    if (!isMetricsMessage(m)) return;
    if (m.type === 'metrics-collect') {
      const render = localRender ?? (() => Promise.resolve(''));
      void render().then(
        (text) => process.send?.({ type: 'metrics-part', id: m.id, text } satisfies MetricsMessage),
        () => process.send?.({ type: 'metrics-part', id: m.id, text: '' } satisfies MetricsMessage),
      );
    } else if (m.type === 'metrics-reply') {
      pending.get(m.id)?.(m.text);
      pending.delete(m.id);
    }
  });
};

/** Start answering the primary (called once in a worker, before the gateway serves). */
export const joinHostMetrics = (): void => listen();

/**
 * What `/metrics` answers: the host's view in a worker (its own, labelled, when the primary does
 * not answer in time), else this process's own.
 */
export const hostMetrics = async (local: () => Promise<string>): Promise<string> => {
  const worker = workerIndex();
  if (worker === undefined || !process.send) return local();
  listen();
  const id = randomUUID();
  const reply = new Promise<string | null>((resolve) => {
    const timer = setTimeout(() => {
      pending.delete(id);
      resolve(null);
    }, HOST_VIEW_MS);
    timer.unref();
    pending.set(id, (text) => {
      clearTimeout(timer);
      resolve(text);
    });
  });
  process.send({ type: 'metrics-request', id } satisfies MetricsMessage);
  return (await reply) ?? mergeExpositions([{ worker, text: await local() }]);
};
