/**
 * Whose a general stream is. With auth on, a stream path a credential names is one of its owner's
 * own streams, kept in the store under a prefix no request path can spell (`/o-<hash(owner)>/`:
 * a request path never starts with an empty segment), so another owner naming the same path names a
 * stream of its own: every read, append, fork, delete or HEAD of another owner's stream is the 404
 * of a missing one, and no create can tell whether another owner used the name. A path covered by
 * one of the credential's grants (`apiKeys[].streams`, src/auth/stream-grants.ts) is the shared
 * stream of that name, used by every credential granted it. Without auth (`open`) every path is
 * the shared stream, as before owners existed. A stream counts against the share of the owner that
 * created it (`maxStreamsPerOwner`), wherever it lives.
 */
import { ownerTag } from '../../src/auth/namespace.js';
import type { Principal } from '../../src/auth/principal.js';
import { grantsCover } from '../../src/auth/stream-grants.js';

export interface StreamPlace {
  /** The stream's name in the store. */
  storePath: string;
  /** Whose share of maxStreamsPerOwner a stream created here counts against; null: nobody's. */
  owner: string | null;
}

export const placeOf = (p: Pick<Principal, 'kind' | 'owner' | 'streams'>, path: string): StreamPlace => {
  if (p.kind === 'open') return { storePath: path, owner: null };
  const owner = ownerTag(p.owner).slice(0, -1);
  if (grantsCover(p.streams, path)) return { storePath: path, owner };
  return { storePath: `/${owner}/${path}`, owner };
};
