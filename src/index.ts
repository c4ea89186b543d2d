/**
 * fair-relay: a durable relay that delivers events in order within each flow and fairly across
 * flows, quarantining a failing head in place. This entry is all of it; an application that needs
 * one backend and no HTTP loads less through `fair-relay/sqlite` or `fair-relay/postgres` (the
 * core and that backend), adding `fair-relay/http` or `fair-relay/dashboard` where it uses them.
 *
 * @module
 */
export * from "./core.js"
/** The queue and the receiver on SQLite, and the queue in memory (SQLite on `:memory:`). */
export { MemoryRelayQueue, SqliteInbox, SqliteRelayQueue } from "./sqlite.js"
/** The queue and the receiver on PostgreSQL. */
export { PgInbox, PgRelayQueue } from "./postgres.js"
/** Delivery over HTTP, and the receiver's HTTP handler. */
export { HttpInbox, HttpTransport, WebhookSignature } from "./http.js"
/** The operator dashboard. */
export { Dashboard } from "./dashboard.js"
