/**
 * The agent card per release line (`GET /.well-known/agent-card.json`, never behind the door token),
 * in the shapes docs/release-lines.md "Telling the lines apart" describes: the gateway detects the line from
 * it, so each shape here is deliberate, including where the session id sits.
 */
import type { LineRules } from './release-line.js';

const CAPSULE_EXTENSION = 'https://murmur.dev/a2a/capsule/v1';
export const STREAM_EXTENSION = 'https://murmur.dev/a2a/ext#murmur-stream-v1';
const NAME = 'murmur-simulator';

/** Every frame name a 0.6+ door can write (the stream extension lists them; no `capsule-closed`). */
const STREAM_FRAMES = [
  'connection-ack',
  'status',
  'text',
  'thinking',
  'artifact',
  'tool-call-started',
  'tool-call-progress',
  'gap',
  'lagged',
  'error',
];

export interface CardContext {
  rules: LineRules;
  sessionId: string;
  url: string;
  /** A door token is set: the public card of 0.5+ then hides the session id. */
  authenticated: boolean;
}

/**
 * The card. `extended` is the authenticated extended card (0.5+ JSON-RPC, behind the token), which
 * always names the session.
 */
export const agentCard = (ctx: CardContext, extended = false): Record<string, unknown> => {
  const { rules, sessionId } = ctx;
  if (rules.release === 'spec') {
    // The spec's card, plus the 0.3 top-level session_id (metadata.session_id kept for old readers).
    return {
      name: NAME,
      version: rules.version,
      protocolVersion: '0.3',
      capabilities: { streaming: true },
      session_id: sessionId,
      metadata: { session_id: sessionId },
    };
  }
  if (rules.release === '0.4') {
    return {
      name: NAME,
      version: rules.version,
      protocolVersion: '0.3',
      session_id: sessionId,
      serves: { 'stream/watch': true, 'message/stream': true, 'tasks/cancel': true, 'tasks/get': true },
      capabilities: { streaming: true, cancellation: true },
    };
  }
  // 0.5+: the A2A 1.0 card shape; the session id moved into the capsule extension's params.
  const hideSession = ctx.authenticated && !extended;
  const extensions: Record<string, unknown>[] = [
    { uri: CAPSULE_EXTENSION, params: hideSession ? {} : { sessionId } },
  ];
  if (rules.toolCallFrames)
    extensions.push({ uri: STREAM_EXTENSION, params: { frames: [...STREAM_FRAMES] } });
  return {
    name: NAME,
    description: 'A simulated Murmur capsule: it echoes each message back in chunks.',
    version: rules.version,
    skills: [
      {
        id: 'echo',
        name: 'Echo',
        description: 'Answers every message with "Echo: " and the message, in chunks.',
        tags: ['simulator'],
      },
    ],
    supportedInterfaces: [
      { url: ctx.url, protocolBinding: 'JSONRPC', protocolVersion: rules.a2a1 ? '1.0' : '0.3' },
    ],
    capabilities: { streaming: true, extensions },
  };
};
