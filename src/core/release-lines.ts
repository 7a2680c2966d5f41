/**
 * What each capsule release line means for a surface reading the log (murmur-upstream.md "Release
 * lines"). Adapters ask these questions, never compare line names themselves.
 */
import type { ReleaseLine } from '../log/record.js';

const ORDER: readonly ReleaseLine[] = ['0.2', 'spec', '0.4', '0.5', '0.6', '1.0'];

const atLeast = (line: ReleaseLine | null, floor: ReleaseLine): boolean =>
  line !== null && ORDER.indexOf(line) >= ORDER.indexOf(floor);

/** `message/stream` closes on its own task's final only (0.5+); before, on any task's. */
export const closesOnOwnFinal = (line: ReleaseLine | null): boolean => atLeast(line, '0.5');
