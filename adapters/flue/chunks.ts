/**
 * The Flue read formats (§FlueConversationSnapshot, §ConversationStreamChunk) as TypeScript types.
 * Shapes only; projection.ts produces them and snapshot.ts folds them.
 */

export type SettlementOutcome = 'completed' | 'failed' | 'aborted';

export interface FlueSettlement {
  submissionId: string;
  outcome: SettlementOutcome;
  error?: unknown;
}

export type FluePart =
  | { type: 'text' | 'reasoning'; text: string; state: 'streaming' | 'done' }
  | { type: `data-${string}`; data: unknown }
  | {
      type: 'dynamic-tool';
      toolName: string;
      toolCallId: string;
      state: 'input-available' | 'output-available' | 'output-error';
      input: unknown;
      output?: unknown;
      errorText?: string;
      durationMs?: number;
    };

export interface FlueMessage {
  id: string;
  role: 'user' | 'assistant' | 'system';
  purpose: 'user' | 'assistant' | 'dispatch' | 'advisory';
  display: 'visible' | 'hidden' | 'diagnostic';
  submissionId?: string;
  turnId?: string;
  signal?: { tagName?: string; attributes?: Record<string, string> };
  parts: FluePart[];
  metadata?: Record<string, unknown>;
}

export interface FlueSnapshot {
  v: 1;
  conversationId: string;
  offset: string;
  messages: FlueMessage[];
  settlements: FlueSettlement[];
}

export interface ChunkPosition {
  batch: number;
  index: number;
}

type Base = { conversationId: string; position: ChunkPosition };

export type FlueChunk = Base &
  (
    | { type: 'conversation-reset'; snapshot: FlueSnapshot }
    | { type: 'message-appended'; message: FlueMessage }
    | { type: 'message-started'; messageId: string; submissionId?: string; timestamp?: string }
    | { type: 'data-part'; messageId: string; name: string; data: unknown }
    | { type: 'message-delta'; messageId: string; kind: 'text' | 'reasoning'; delta: string }
    | {
        type: 'tool-input';
        messageId: string;
        toolCallId: string;
        toolName: string;
        input: unknown;
        timestamp?: string;
      }
    | { type: 'tool-output'; toolCallId: string; output: unknown; durationMs?: number; timestamp?: string }
    | {
        type: 'tool-output-error';
        toolCallId: string;
        errorText: string;
        durationMs?: number;
        timestamp?: string;
      }
    | { type: 'message-completed'; messageId: string; timestamp?: string }
    | {
        type: 'submission-settled';
        submissionId: string;
        outcome: SettlementOutcome;
        error?: unknown;
        timestamp?: string;
      }
  );

/** A chunk body before the projector stamps `conversationId` and `position`. */
export type ChunkBody = FlueChunk extends infer C
  ? C extends FlueChunk
    ? Omit<C, 'conversationId' | 'position'>
    : never
  : never;
