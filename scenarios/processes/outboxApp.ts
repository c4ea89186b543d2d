/**
 * The application of the real-process outbox proofs, on either backend: its tables `orders` and
 * `order_log`, and the queue on its own client (`makeClient`) in the same database — one SQLite
 * file, or one PostgreSQL schema (a locator, as in ./stores.ts). An order's transaction inserts
 * the order, enqueues its event `<order>:created` into the order's flow and, if it commits,
 * appends the order to `order_log` after the enqueue: within a flow, whose row the enqueue locks
 * until the commit, the log's ids then follow the commit order. Used by the child
 * (./outboxChild.ts) and by the parent (test/processes/outbox.test.ts), which reads the outcome
 * with fresh connections.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import Database from "better-sqlite3"
import { Effect, Redacted } from "effect"
import type { Scope } from "effect"
import type { EnqueueInput, RelayQueueService, Snapshot } from "../../src/index.js"
// The modules themselves rather than src/index.ts: a child loads less (faster start-up).
import * as PgRelayQueue from "../../src/layers/PgRelayQueue.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { isPostgres } from "./stores.js"

/** One order a process is told to place: its flow, and whether its transaction rolls back after the enqueue. */
export interface PlannedOrder {
  readonly orderId: string
  readonly flowId: string
  readonly rollback: boolean
  /** A pause between the enqueue and the end of the transaction (widens the window of a race). */
  readonly pauseMillis: number
  /**
   * A pause before the transaction (orders arrive apart). Without it one SQLite process keeps the
   * write lock: it begins again the moment it commits, while the others sleep between retries.
   */
  readonly gapMillis: number
}

/** The event of an order. */
export const orderEvent = (order: Pick<PlannedOrder, "orderId" | "flowId">): EnqueueInput => ({
  eventId: `${order.orderId}:created`,
  flowId: order.flowId,
  body: { orderId: order.orderId }
})

/** The application's client on the database at `locator` (a PostgreSQL client: a pool of two). */
export const appClient = (locator: string): Effect.Effect<SqlClient.SqlClient, unknown, Scope.Scope> => {
  const client: Effect.Effect<SqlClient.SqlClient, unknown, Scope.Scope | Reactivity.Reactivity> = isPostgres(locator)
    ? PgClient.make({ url: Redacted.make(locator), maxConnections: 2 })
    : SqliteClient.make({ filename: locator })
  return Effect.provide(client, Reactivity.layer)
}

/**
 * The queue on the application's client (created and migrated by the first caller). Its own
 * transactions on SQLite wait generously for the other processes' write lock.
 */
export const appQueue = (locator: string, sql: SqlClient.SqlClient): Effect.Effect<RelayQueueService, unknown> =>
  (isPostgres(locator) ? PgRelayQueue.makeClient() : SqliteRelayQueue.makeClient({ busyTimeoutMillis: 30_000 })).pipe(
    Effect.provideService(SqlClient.SqlClient, sql)
  )

/**
 * Runs `effect` in an application transaction: on SQLite `withImmediateTransaction` (the write
 * lock from the start), on PostgreSQL a plain `sql.withTransaction`.
 */
export const inAppTransaction = (locator: string, sql: SqlClient.SqlClient) =>
<A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E | SqlError> =>
  isPostgres(locator)
    ? sql.withTransaction(effect)
    : SqliteRelayQueue.withImmediateTransaction(sql)(effect)

/** Creates the application's tables and the queue's at `locator`. */
export const createApp = (locator: string): Promise<void> =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const sql = yield* appClient(locator)
    const serial = sql.onDialectOrElse({ pg: () => "BIGSERIAL PRIMARY KEY", orElse: () => "INTEGER PRIMARY KEY AUTOINCREMENT" })
    yield* sql`CREATE TABLE orders (id TEXT PRIMARY KEY, flow_id TEXT NOT NULL, process INTEGER NOT NULL)`
    yield* sql.unsafe(`CREATE TABLE order_log (id ${serial}, order_id TEXT NOT NULL, flow_id TEXT NOT NULL)`)
    yield* appQueue(locator, sql)
  })))

/** What the database at `locator` holds: the application's rows and the queue. */
export interface AppState {
  readonly orders: ReadonlyArray<{ readonly id: string; readonly flowId: string; readonly process: number }>
  /** `order_log` by id. */
  readonly log: ReadonlyArray<{ readonly id: number; readonly orderId: string; readonly flowId: string }>
  readonly queue: Snapshot
}

/** Reads the application's rows and the queue at `locator` with a fresh client. */
export const readApp = (locator: string): Promise<AppState> =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const sql = yield* appClient(locator)
    const orders = yield* sql<{ readonly id: string; readonly flow_id: string; readonly process: number }>`
      SELECT id, flow_id, process FROM orders ORDER BY id`
    const log = yield* sql<{ readonly id: number | string; readonly order_id: string; readonly flow_id: string }>`
      SELECT id, order_id, flow_id FROM order_log ORDER BY id`
    const queue = yield* Effect.flatMap(appQueue(locator, sql), (q) => q.snapshot)
    return {
      orders: orders.map((r) => ({ id: r.id, flowId: r.flow_id, process: Number(r.process) })),
      log: log.map((r) => ({ id: Number(r.id), orderId: r.order_id, flowId: r.flow_id })),
      queue
    }
  })))

/** One claim of `drainQueue`, in claim order. */
export interface Delivery {
  readonly eventId: string
  readonly flowId: string
  readonly seq: number
  /** The settle's outcome (`Acked` for an `Accepted` reply). */
  readonly outcome: string
}

/**
 * Plays the relay against the queue at `locator` from a fresh client: claim, settle `Accepted`,
 * until a claim is `Idle` (at most `limit` claims). Returns the claims and the final counts.
 */
export const drainQueue = (locator: string, limit: number) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const queue = yield* Effect.flatMap(appClient(locator), (sql) => appQueue(locator, sql))
    const deliveries: Array<Delivery> = []
    for (let i = 0; i < limit; i++) {
      const claimed = yield* queue.claim
      if (claimed._tag === "Idle") break
      const settled = yield* queue.settle(claimed.token, { _tag: "Accepted" })
      const { eventId, flowId, seq } = claimed.event
      deliveries.push({ eventId, flowId, seq, outcome: settled._tag })
    }
    const last = yield* queue.claim
    return { deliveries, idleAtEnd: last._tag === "Idle", stats: yield* queue.stats }
  })))

/**
 * Whether a transaction of another process still holds the database at `locator`, seen from a
 * fresh connection: on SQLite, whether the write lock is taken (a `BEGIN IMMEDIATE` that does not
 * wait is refused with SQLITE_BUSY); on PostgreSQL, whether backend `backendPid` is still there
 * with a transaction open.
 */
export const transactionOpen = (locator: string, backendPid: number | null): Promise<boolean> => {
  if (isPostgres(locator)) {
    return Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const sql = yield* appClient(locator)
      const rows = yield* sql<{ readonly state: string | null }>`SELECT state FROM pg_stat_activity WHERE pid = ${backendPid}`
      return rows.some((row) => row.state === "idle in transaction" || row.state === "active")
    })))
  }
  const db = new Database(locator, { timeout: 0 })
  try {
    db.exec("BEGIN IMMEDIATE")
    db.exec("ROLLBACK")
    return Promise.resolve(false)
  } catch (error) {
    if ((error as { code?: unknown }).code === "SQLITE_BUSY") return Promise.resolve(true)
    return Promise.reject(error)
  } finally {
    db.close()
  }
}
