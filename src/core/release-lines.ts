/**
 * What each capsule release line means for a surface reading the log (docs/release-lines.md). Adapters ask these questions, never compare line names themselves.
 */
import type { ReleaseLine } from '../log/record.js';

const ORDER: readonly ReleaseLine[] = ['0.2', 'spec', '0.4', '0.5', '0.6', '1.0'];

const atLeast = (line: ReleaseLine | null, floor: ReleaseLine): boolean =>
  line !== null && ORDER.indexOf(line) >= ORDER.indexOf(floor);

/** `message/stream` closes on its own task's final only (0.5+); before, on any task's. */
export const closesOnOwnFinal = (line: ReleaseLine | null): boolean => atLeast(line, '0.5');

/** The A2A 1.0 door: its method names, and exactly one `A2A-Version: 1.0` (or 1.0.n) on every call. */
export const speaksA2a1 = (line: ReleaseLine | null): boolean => line === '1.0';

/** Whether an `A2A-Version` header value (as received: repeats joined by commas) is one 1.0 version. */
export const a2aVersionOk = (value: string | undefined): boolean =>
  value !== undefined && /^1\.0(\.\d+)?$/.test(value.trim());

/** The name of the streaming submit in the capsule's own dialect (`stream/watch` keeps its name). */
export const streamMethod = (line: ReleaseLine | null): string =>
  speaksA2a1(line) ? 'SendStreamingMessage' : 'message/stream';
