/** The Durable Streams surface (PROTOCOL.md of durable-streams/durable-streams), mounted at '/'. */
export { createCapsuleStreamRoutes as createDurableStreamsRoutes } from './capsule-stream.js';
