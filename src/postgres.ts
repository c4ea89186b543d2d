/**
 * `fair-relay/postgres`: the core (`fair-relay/core`) and the PostgreSQL backend — what an
 * application that keeps its queue and receiver in PostgreSQL imports, without SQLite or HTTP.
 *
 * @module
 */
export * from "./core.js"
/** The queue on PostgreSQL. */
export * as PgRelayQueue from "./layers/PgRelayQueue.js"
/** The receiver on PostgreSQL. */
export * as PgInbox from "./layers/PgInbox.js"
