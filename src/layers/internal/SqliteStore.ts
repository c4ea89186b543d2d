/**
 * Opening a SQLite store: one connection per store (each store owns its client), WAL (the
 * client's default journal mode) with `synchronous=FULL`, a busy timeout, and `BEGIN IMMEDIATE`
 * write transactions.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import type { Connection } from "@effect/sql/SqlConnection"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { Cause, Clock, Duration, Effect, Schedule, Scope } from "effect"
import { commitFailuresAsErrors, isolated } from "./Store.js"
import type { Store } from "./Store.js"

/** Options common to every SQLite store. */
export interface SqliteStoreOptions {
  /** Path of the database file, or ":memory:". */
  readonly filename: string
  /** How long a write waits for another process's write lock before failing with SQLITE_BUSY (default 5000 ms). */
  readonly busyTimeoutMillis?: number | undefined
}

/** Default busy timeout. */
export const DefaultBusyTimeoutMillis = 5_000

/** Wait SQLite itself spends on a lock before answering SQLITE_BUSY (it blocks the event loop). */
const NativeBusyMillis = 10

const isBusy = (error: SqlError): boolean => {
  const code = (error.cause as { readonly code?: unknown } | undefined)?.code
  return code === "SQLITE_BUSY" || code === "SQLITE_LOCKED"
}

const live = Clock.make()

/**
 * Waits for the write lock without blocking the event loop: SQLite's own busy handler sleeps in
 * C (stalling every fiber of the process, HTTP included) and backs off to 100 ms naps, so under
 * contention between processes we ask for the lock, and on SQLITE_BUSY retry after short async
 * sleeps (1 ms doubling to 25 ms, jittered) until `busyTimeoutMillis` is spent. The wait is
 * physical, so it runs on the live clock whatever clock the caller uses.
 */
const retryBusy = (busyTimeoutMillis: number) => <A>(effect: Effect.Effect<A, SqlError>): Effect.Effect<A, SqlError> =>
  effect.pipe(
    Effect.retry({
      while: isBusy,
      schedule: Schedule.exponential(Duration.millis(1), 2).pipe(
        Schedule.either(Schedule.spaced(Duration.millis(25))),
        Schedule.jittered,
        Schedule.upTo(Duration.millis(busyTimeoutMillis))
      )
    }),
    Effect.withClock(live)
  )

const transaction = (client: SqlClient.SqlClient, begin: string, busyTimeoutMillis: number) => {
  const run = (conn: Connection, statement: string) =>
    conn.executeUnprepared(statement, [], undefined)
  const withTransaction = SqlClient.makeWithTransaction({
    transactionTag: SqlClient.TransactionConnection,
    spanAttributes: [["db.system.name", "sqlite"]],
    acquireConnection: Effect.flatMap(Scope.make(), (scope) =>
      Effect.map(Scope.extend(client.reserve, scope), (conn) => [scope, conn] as const)),
    begin: (conn) => retryBusy(busyTimeoutMillis)(run(conn, begin)),
    savepoint: (conn, id) => run(conn, `SAVEPOINT fair_relay_${id}`),
    // A COMMIT that fails leaves SQLite's transaction open on our only connection; roll it back
    // so the next operation does not find itself inside a dead transaction.
    commit: (conn) => run(conn, "COMMIT").pipe(Effect.tapError(() => Effect.ignore(run(conn, "ROLLBACK")))),
    rollback: (conn) => run(conn, "ROLLBACK"),
    rollbackSavepoint: (conn, id) => run(conn, `ROLLBACK TO SAVEPOINT fair_relay_${id}`)
  })
  return <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
    isolated(commitFailuresAsErrors(withTransaction(effect)))
}

const openFailed = (filename: string) => (cause: Cause.Cause<never>) =>
  Effect.fail(new SqlError({ cause: Cause.squash(cause), message: `cannot open SQLite store ${JSON.stringify(filename)}` }))

/**
 * Opens a SQLite store and applies its migrations (recorded in `migrationsTable`) inside one
 * write transaction, so concurrent processes opening the same new file do not race.
 */
export const open = (
  options: SqliteStoreOptions,
  migrations: Record<string, Effect.Effect<void, SqlError, SqlClient.SqlClient>>,
  migrationsTable: string
): Effect.Effect<Store, SqlError | Migrator.MigrationError, Scope.Scope> =>
  Effect.gen(function*() {
    const sql = yield* SqliteClient.make({ filename: options.filename }).pipe(
      Effect.provide(Reactivity.layer),
      Effect.catchAllDefect((defect) => openFailed(options.filename)(Cause.die(defect)))
    )
    const busy = Math.max(0, Math.floor(options.busyTimeoutMillis ?? DefaultBusyTimeoutMillis))
    yield* sql.unsafe(`PRAGMA busy_timeout = ${Math.min(busy, NativeBusyMillis)}`)
    yield* sql`PRAGMA synchronous = FULL`
    const store: Store = {
      sql,
      write: transaction(sql, "BEGIN IMMEDIATE", busy),
      read: transaction(sql, "BEGIN", busy)
    }
    yield* store.write(
      Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: migrationsTable })
    ).pipe(Effect.provideService(SqlClient.SqlClient, sql))
    return store
  })
