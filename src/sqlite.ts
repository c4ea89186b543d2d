/**
 * `fair-relay/sqlite`: the core (`fair-relay/core`) and the SQLite backend — what an application
 * that keeps its queue and receiver in SQLite imports, without PostgreSQL's driver or HTTP.
 *
 * @module
 */
export * from "./core.js"
/** The queue on SQLite. */
export * as SqliteRelayQueue from "./layers/SqliteRelayQueue.js"
/** The receiver on SQLite. */
export * as SqliteInbox from "./layers/SqliteInbox.js"
/** The queue in memory (SQLite on `:memory:`: no file, no persistence): for tests of code that uses `RelayQueue`. */
export * as MemoryRelayQueue from "./layers/MemoryRelayQueue.js"
