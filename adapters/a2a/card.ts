/**
 * The capsule as an A2A 1.0 agent (spec §8; notes A2): its name, version, description and skills
 * from the capsule's own card as the upstream read it (a default skill when it lists none), one JSON-RPC interface at the gateway. The interface is listed for
 * 1.0 and again for 0.3, and the 0.3 card's top-level `url`/`preferredTransport` are kept, so a
 * 0.3 client finds the same door.
 */
import type { GatewayCore } from '../../src/core/types.js';
import { packageVersion } from '../../src/version.js';

const VERSION = packageVersion();

export const interfaceUrl = (requestUrl: string, publicUrl: string | null, capsule: string): string => {
  const base = publicUrl ? publicUrl.replace(/\/+$/, '') : new URL(requestUrl).origin;
  return `${base}/a2a/${encodeURIComponent(capsule)}/`;
};

export const agentCard = async (
  core: GatewayCore,
  capsule: string,
  url: string,
  pushNotifications: boolean,
): Promise<Record<string, unknown>> => {
  const card = (await core.status(capsule)).card;
  const name = card?.name ?? capsule;
  const gateway = `Served by murmur-gateway as capsule ${capsule}: tasks queue while it is busy, and every stream resumes from its id: cursor.`;
  const description = card?.description
    ? `${card.description}\n\n${gateway}`
    : `Murmur capsule ${name}. ${gateway}`;
  return {
    name,
    description,
    version: card?.version ?? VERSION,
    supportedInterfaces: [
      { url, protocolBinding: 'JSONRPC', protocolVersion: '1.0' },
      { url, protocolBinding: 'JSONRPC', protocolVersion: '0.3' },
    ],
    provider: { organization: 'murmur-gateway', url },
    capabilities: { streaming: true, pushNotifications, extendedAgentCard: false },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain'],
    skills: card?.skills?.map((s) => ({
      ...s,
      inputModes: ['text/plain'],
      outputModes: ['text/plain'],
    })) ?? [
      {
        id: 'message',
        name: 'Message the capsule',
        description: `Send ${name} a text message; it works on it as one task and streams its progress, tool results and reply.`,
        tags: ['murmur'],
        inputModes: ['text/plain'],
        outputModes: ['text/plain'],
      },
    ],
    // The 0.3 card's fields, for 0.3 clients.
    url,
    preferredTransport: 'JSONRPC',
    protocolVersion: '0.3',
  };
};
