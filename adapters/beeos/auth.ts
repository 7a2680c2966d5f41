/**
 * BeeOS keys (`oag_…`) are ordinary gateway API keys (config `apiKeys`): the gateway's auth
 * middleware resolves the caller and routes read `principalOf(c)` (see guardAgent). Only the hashing
 * helper stays here, for configuring keys in the form they are stored.
 */
export { sha256Hex as hashApiKey } from '../../src/auth/admin-token.js';
