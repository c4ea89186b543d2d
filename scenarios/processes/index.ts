/**
 * Real-OS-process scenarios: the claim race (scenario 3 of docs/protocol.md), the
 * immediate-transaction write race, and the six crash points (scenarios 13–18). Each function
 * returns structured observations and prints nothing; callers (the tests, the demo) decide what to
 * check or show. The claim race and the crash points run on SQLite files (`dir`) or on the stores
 * of any `StoreBackend` (PostgreSQL schemas: test/processes/support.ts).
 */
export * from "./claimRace.js"
export * from "./crashPoint.js"
export * from "./writeRace.js"
export { backendOf, isPostgres, sqliteFiles } from "./stores.js"
export type { InboxState, StoreBackend, StoresOption } from "./stores.js"
export { spawnChild } from "./spawn.js"
export type { Child, ChildExit, ChildMessage } from "./spawn.js"
