/** The StreamStore contracts (streams, forks) on the embedded store. */
import { MemoryStreamStore } from '../../src/streams/memory-stream-store.js';
import { runForkContract } from './stream-store-forks.contract.js';
import { runStreamStoreContract } from './stream-store.contract.js';

const factory = (maxStreams = 1000, maxStreamsPerOwner?: number): MemoryStreamStore =>
  new MemoryStreamStore({ maxStreams, ...(maxStreamsPerOwner ? { maxStreamsPerOwner } : {}) });
runStreamStoreContract('memory', factory);
runForkContract('memory', factory);
