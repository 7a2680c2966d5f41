/**
 * The gateway for this directory's tests and the fan-out bench: startTestGateway (the real composition
 * root) with a short upstream backoff, exposing the store and writer for tests that append facts.
 */
import type { GatewayCore } from '../../../src/core/types.js';
import type { AdapterConfig } from '../../../src/http/adapter-deps.js';
import type { LogWriter } from '../../../src/log/log-writer.js';
import type { LogStore, RetentionPolicy } from '../../../src/log/store.js';
import { startTestGateway } from '../../support/gateway.js';

export interface MurmurGateway {
  baseUrl: string;
  core: GatewayCore;
  store: LogStore;
  writer: LogWriter;
  close(): Promise<void>;
}

export interface MurmurGatewayOptions {
  capsules: Record<string, string>;
  redisUrl?: string;
  config?: Partial<AdapterConfig> & { retention?: RetentionPolicy };
}

export const startMurmurGateway = async (opts: MurmurGatewayOptions): Promise<MurmurGateway> => {
  const gw = await startTestGateway({
    capsules: opts.capsules,
    ...(opts.redisUrl ? { redisUrl: opts.redisUrl } : {}),
    ...(opts.config ? { config: opts.config } : {}),
    // Tests cut and stop capsules: reconnect quickly.
    tuning: { upstream: { backoffBaseMs: 20, backoffCapMs: 200 } },
  });
  return {
    baseUrl: gw.baseUrl,
    core: gw.core,
    store: gw.gateway.store,
    writer: gw.gateway.writer,
    close: gw.close,
  };
};
