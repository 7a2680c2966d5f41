/** The StreamStore contract on the embedded store. */
import { MemoryStreamStore } from '../../src/streams/memory-stream-store.js';
import { runStreamStoreContract } from './stream-store.contract.js';

runStreamStoreContract('memory', (maxStreams = 1000) => new MemoryStreamStore({ maxStreams }));
