/** An API key as the config holds it: the lowercase hex SHA-256 of the full key (BeeOS `oag_…` keys too). */
export { sha256Hex as hashApiKey } from '../../src/auth/admin-token.js';
