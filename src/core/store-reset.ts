/**
 * The store-reset fact's recogniser, for the layers above the log: it lives beside the fact itself
 * (src/log/store.ts), so the log's own readers use the same one.
 */
export { isStoreReset } from '../log/store.js';
