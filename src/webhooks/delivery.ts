/**
 * One webhook POST, as every webhook the gateway sends makes it: the receiver checked against the
 * SSRF policy on every address its host resolves to now (receiver-url.ts), no redirect followed,
 * bounded by a timeout and cut by the caller's signal. What to send, when to retry (retry.ts) and
 * what a 2xx body means are the caller's: Durable Streams subscriptions persist their retry
 * schedule in the subscription document, A2A push notifications keep a cursor per config.
 */
import { receiverReachable, type ReceiverNames, type ReceiverPolicy } from './receiver-url.js';

export interface WebhookPost {
  url: string;
  body: string;
  headers: Record<string, string>;
  policy: ReceiverPolicy;
  /** How a refusal names the URL and the loopback setting (the surface's own words). */
  names?: ReceiverNames;
  timeoutMs: number;
  /** Aborted: the POST is cut (the gateway is closing, the deliverer lost its lease). */
  signal?: AbortSignal;
}

/** A 2xx with the first 64 KiB of its body, or why not (refused by policy, a status, a socket error). */
export type WebhookVerdict = { ok: true; status: number; text: string } | { ok: false; why: string };

/** Answers are read this far: a receiver's reply is an acknowledgement, not a payload. */
const MAX_ANSWER_CHARS = 64 * 1024;

/** `work`, or a rejection as soon as `signal` aborts (its listener removed either way). */
const untilAborted = <T>(work: Promise<T>, signal: AbortSignal): Promise<T> => {
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  let onAbort = (): void => undefined;
  const aborted = new Promise<never>((_resolve, reject) => {
    onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
  });
  return Promise.race([work, aborted]).finally(() => signal.removeEventListener('abort', onAbort));
};

/** POST `body` to `url`; never throws. */
export const postWebhook = async (post: WebhookPost): Promise<WebhookVerdict> => {
  const timeout = AbortSignal.timeout(post.timeoutMs);
  const signal = post.signal ? AbortSignal.any([timeout, post.signal]) : timeout;
  try {
    // The name is resolved within the same bound: a resolver that does not answer is a failed attempt.
    const reachable = await untilAborted(
      receiverReachable(new URL(post.url), post.policy, post.names),
      signal,
    );
    if (!reachable.ok) return { ok: false, why: reachable.reason };
    const res = await fetch(post.url, {
      method: 'POST',
      headers: post.headers,
      body: post.body,
      redirect: 'manual',
      signal,
    });
    const text = (await res.text()).slice(0, MAX_ANSWER_CHARS);
    if (res.status < 200 || res.status > 299) return { ok: false, why: `status ${res.status}` };
    return { ok: true, status: res.status, text };
  } catch (err) {
    return { ok: false, why: String(err) };
  }
};
