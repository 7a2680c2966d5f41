/**
 * The upstream room for one capsule, as the core sees it (`UpstreamPort`): the ingestor's watch and
 * state, plus the client's submit, cancel and forward. Wiring capsules to it is the app's job.
 */
import type { Logger } from 'pino';
import type { UpstreamPort } from '../core/gateway-core.js';
import type { CancelOutcome, RpcForwardResult, SubmitOutcome } from '../core/types.js';
import { CapsuleClient, type CapsuleClientOptions, type SubmitParams } from './capsule-client.js';
import { CapsuleIngestor, type IngestorOptions, type IngestorState } from './ingestor.js';
import type { SseFrame } from './sse-frames.js';

export interface CapsuleUpstreamOptions
  extends Omit<IngestorOptions, 'logger'>, Omit<CapsuleClientOptions, 'url' | 'doorToken'> {
  logger?: Logger;
}

export class CapsuleUpstream implements UpstreamPort {
  readonly ingestor: CapsuleIngestor;
  readonly client: CapsuleClient;

  private readonly frameListeners = new Set<(frame: SseFrame) => void>();

  constructor(options: CapsuleUpstreamOptions) {
    this.ingestor = new CapsuleIngestor({
      ...options,
      onFrame: (frame) => {
        options.onFrame?.(frame);
        for (const l of this.frameListeners) l(frame);
      },
    });
    this.client = new CapsuleClient({
      ...options,
      url: options.url,
      doorToken: options.doorToken ?? null,
      watchFrames: (listener) => {
        this.frameListeners.add(listener);
        return () => this.frameListeners.delete(listener);
      },
    });
  }

  get url(): string {
    return this.client.url;
  }

  start(): void {
    this.ingestor.start();
  }

  async stop(): Promise<void> {
    this.client.close();
    await this.ingestor.stop();
  }

  state(): IngestorState {
    return this.ingestor.state();
  }

  submit(request: SubmitParams): Promise<SubmitOutcome> {
    return this.client.submit(request);
  }

  cancel(taskId: string): Promise<CancelOutcome> {
    return this.client.cancel(taskId);
  }

  forward(body: string): Promise<RpcForwardResult> {
    return this.client.forward(body);
  }
}
