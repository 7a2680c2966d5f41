/**
 * Which release line a capsule runs, read off its public agent card (`GET
 * /.well-known/agent-card.json`, never behind the door's token), by docs/release-lines.md "Telling the lines apart":
 * - no `supportedInterfaces`: 0.4 or older — a `serves` block is 0.4, a top-level `session_id`
 *   without one is 0.3 (the spec's line), neither is 0.1/0.2;
 * - an interface declaring protocolVersion "0.3": 0.5, or 0.6 when the card lists the stream
 *   extension `#murmur-stream-v1`;
 * - "1.0" (or 1.0.n): the A2A 1.0 door.
 * The session id moved from the top-level `session_id` (0.3–0.4) to the capsule extension's
 * `params.sessionId` (0.5+); an authenticated door's public card has none.
 */
import http from 'node:http';
import https from 'node:https';
import { speaksA2a1 } from '../core/release-lines.js';
import type { CardSkill, CardSummary, ReleaseLine } from '../log/record.js';

export interface CapsuleCard {
  line: ReleaseLine;
  sessionId: string | null;
  name: string | null;
  version: string | null;
  /** The card's own description and skills (A2A-shaped cards, 0.5 and later), when it has them. */
  description?: string;
  skills?: CardSkill[];
}

/** Bounds on what is kept of a card's description and skills: they travel in every connection's fact. */
const MAX_TEXT = 1024;
const MAX_SKILLS = 16;
const MAX_TAGS = 8;

const bounded = (v: unknown): string | null =>
  typeof v === 'string' && v !== '' ? v.slice(0, MAX_TEXT) : null;

const aboutOf = (card: Record<string, unknown>): Pick<CapsuleCard, 'description' | 'skills'> => {
  const description = bounded(card.description);
  const skills: CardSkill[] = [];
  for (const s of Array.isArray(card.skills) ? card.skills.slice(0, MAX_SKILLS) : []) {
    const o = record(s);
    const id = bounded(o?.id);
    if (!o || id === null) continue;
    const tags = Array.isArray(o.tags) ? o.tags.map(bounded).filter((t): t is string => t !== null) : [];
    skills.push({
      id,
      name: bounded(o.name) ?? id,
      description: bounded(o.description) ?? '',
      tags: tags.slice(0, MAX_TAGS),
    });
  }
  return { ...(description !== null ? { description } : {}), ...(skills.length > 0 ? { skills } : {}) };
};

const STREAM_EXTENSION = '#murmur-stream-v1';

const record = (v: unknown): Record<string, unknown> | null =>
  v !== null && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : null;

const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null);

const extensionsOf = (card: Record<string, unknown>): Record<string, unknown>[] => {
  const list = record(card.capabilities)?.extensions;
  return Array.isArray(list) ? list.map(record).filter((e): e is Record<string, unknown> => e !== null) : [];
};

/** The line, session and name a card declares (any JSON value; a card of no known shape is the spec's). */
export const cardLine = (value: unknown): CapsuleCard => {
  const card = record(value) ?? {};
  const name = str(card.name);
  const version = str(card.version);
  const interfaces = Array.isArray(card.supportedInterfaces) ? card.supportedInterfaces.map(record) : null;
  if (interfaces) {
    const versions = interfaces.map((i) => str(i?.protocolVersion) ?? '');
    const extensions = extensionsOf(card);
    let sessionId: string | null = null;
    for (const e of extensions) sessionId ??= str(record(e.params)?.sessionId);
    const line: ReleaseLine = versions.some((v) => v === '1.0' || v.startsWith('1.0.'))
      ? '1.0'
      : extensions.some((e) => str(e.uri)?.endsWith(STREAM_EXTENSION))
        ? '0.6'
        : '0.5';
    return { line, sessionId, name, version, ...aboutOf(card) };
  }
  const sessionId = str(card.session_id) ?? str(record(card.metadata)?.session_id);
  if (record(card.serves)) return { line: '0.4', sessionId, name, version };
  // A session id anywhere (the simulator's `metadata.session_id` too) is 0.3's; none at all is 0.1/0.2.
  return { line: sessionId ? 'spec' : '0.2', sessionId, name, version };
};

/** What the log and `/capsules`' readers keep of a card: name, version, and description and skills when it has them. */
export const cardSummary = (card: CapsuleCard): CardSummary => ({
  name: card.name,
  version: card.version,
  ...(card.description !== undefined ? { description: card.description } : {}),
  ...(card.skills !== undefined ? { skills: card.skills } : {}),
});

export interface CardReadOptions {
  agent?: http.Agent;
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** Largest card read (a card is a few KiB; a bigger answer is not a card). */
const MAX_CARD_BYTES = 256 * 1024;

/** GET the card; rejects with a short reason (HTTP status, socket error, not JSON, timeout). */
export const readAgentCard = (url: string, options: CardReadOptions = {}): Promise<CapsuleCard> =>
  new Promise<CapsuleCard>((resolve, reject) => {
    const target = new URL('.well-known/agent-card.json', url.endsWith('/') ? url : `${url}/`);
    const request = target.protocol === 'https:' ? https.request : http.request;
    const req = request(target, {
      method: 'GET',
      headers: { accept: 'application/json' },
      agent: options.agent,
      signal: options.signal,
      timeout: options.timeoutMs ?? 2000,
    });
    req.on('timeout', () => req.destroy(new Error('agent card: timeout')));
    req.on('error', (err: NodeJS.ErrnoException) =>
      reject(new Error(`agent card: ${err.code ?? err.message}`)),
    );
    req.on('response', (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        reject(new Error(`agent card: HTTP ${res.statusCode}`));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_CARD_BYTES) req.destroy(new Error('agent card: too large'));
        else chunks.push(c);
      });
      res.on('end', () => {
        try {
          resolve(cardLine(JSON.parse(Buffer.concat(chunks).toString('utf8'))));
        } catch {
          reject(new Error('agent card: not JSON'));
        }
      });
      res.on('error', (err) => reject(new Error(`agent card: ${err.message}`)));
    });
    req.end();
  });

/** Lines that resume exactly by id within a session (one id sequence per session). */
export const resumesById = (line: ReleaseLine): boolean => line !== 'spec' && line !== '0.2';

/**
 * The session id of a door that keeps it off its public card (0.5+ with a token): the extended card,
 * asked with the token (`agent/getAuthenticatedExtendedCard`, or `GetExtendedAgentCard` on 1.0).
 * Null when the door does not answer with a card that names one.
 */
export const extendedCardSessionId = async (
  url: string,
  doorToken: string,
  line: ReleaseLine,
  timeoutMs = 2000,
): Promise<string | null> => {
  const a2a1 = speaksA2a1(line);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    authorization: `Bearer ${doorToken}`,
    ...(a2a1 ? { 'a2a-version': '1.0' } : {}),
  };
  const method = a2a1 ? 'GetExtendedAgentCard' : 'agent/getAuthenticatedExtendedCard';
  const res = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: {} }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  if (!res.ok) return null;
  const body = (await res.json().catch(() => null)) as { result?: unknown } | null;
  return body && 'result' in body ? cardLine(body.result).sessionId : null;
};
