/**
 * Ownership where the data is: a context id a client chooses (BeeOS `context_id`, a Flue
 * conversation id) is prefixed with its owner's hash before it is used upstream or in the log, so
 * one owner can never name, join or read another owner's context. Without auth (`open`) there is one
 * owner and ids are used as given, as before.
 */
import { createHash } from 'node:crypto';
import type { Principal } from './principal.js';

const PREFIX = /^o-[0-9a-f]{12}-/;

export const ownerTag = (owner: string): string =>
  `o-${createHash('sha256').update(owner, 'utf8').digest('hex').slice(0, 12)}-`;

/** The id used upstream and in the log for a client-chosen `id`. */
export const ownerContext = (p: Pick<Principal, 'kind' | 'owner'>, id: string): string =>
  p.kind === 'open' ? id : `${ownerTag(p.owner)}${id}`;

/** The id as the client chose it (what the gateway answers with). */
export const clientContext = (id: string): string => id.replace(PREFIX, '');
