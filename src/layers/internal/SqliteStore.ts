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
import Database from "better-sqlite3"
import * as fs from "node:fs"
import { IncompatibleStore, InvalidInput } from "../../domain/Errors.js"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { Cause, Clock, Duration, Effect, Schedule, Scope } from "effect"
import { commitFailuresAsErrors, isolated } from "./Store.js"
import type { OpenError, Store } from "./Store.js"

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
    // After a BEGIN that failed (say SQLITE_BUSY) there is no transaction to roll back; that
    // ROLLBACK's complaint must not replace the real error.
    rollback: (conn) =>
      run(conn, "ROLLBACK").pipe(
        Effect.catchIf((error) => /no transaction is active/.test(String((error.cause as Error | undefined)?.message)), () => Effect.void)
      ),
    rollbackSavepoint: (conn, id) => run(conn, `ROLLBACK TO SAVEPOINT fair_relay_${id}`)
  })
  return <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
    isolated(commitFailuresAsErrors(withTransaction(effect)))
}

const openFailed = (filename: string) => (cause: Cause.Cause<never>) =>
  Effect.fail(new SqlError({ cause: Cause.squash(cause), message: `cannot open SQLite store ${JSON.stringify(filename)}` }))

/** The highest migration id a set of migrations ("<id>_<name>") brings a store to. */
export const latestMigration = (migrations: Record<string, unknown>): number =>
  Math.max(0, ...Object.keys(migrations).map((key) => Number.parseInt(key, 10)))

/** What a store's tables say about it: empty, another kind (`null`), or our schema version. */
interface Contents {
  readonly tables: ReadonlyArray<string>
  readonly version: number | null
}

const contentsQuery = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"

/** Refuses contents that are not a store of this kind at a schema version this library knows. */
const checkContents = (filename: string, migrationsTable: string, latest: number) => ({ tables, version }: Contents) => {
  const incompatible = (message: string) => Effect.fail(new IncompatibleStore({ store: filename, message }))
  if (version === null) {
    const shown = `${tables.slice(0, 5).join(", ")}${tables.length > 5 ? ", …" : ""}`
    return incompatible(`${filename} is not a store of this kind: it has tables (${shown}) but no ${migrationsTable}`)
  }
  return version > latest
    ? incompatible(`${filename} was written by a newer version of fair-relay (schema ${version}; this one knows up to ${latest})`)
    : Effect.void
}

// SQLite's file header: byte 18 is 2 for a database in WAL mode.
const isWalFile = (filename: string): boolean => {
  const header = Buffer.alloc(20)
  const fd = fs.openSync(filename, "r")
  try {
    return fs.readSync(fd, header, 0, 20, 0) === 20 && header.toString("latin1", 0, 15) === "SQLite format 3" && header[18] === 2
  } finally {
    fs.closeSync(fd)
  }
}

/**
 * Refuses a file in rollback-journal mode (another application's database, typically) before
 * anything opens it for writing, which would switch it to WAL and add our tables. A read-only
 * connection to such a file creates no side files. A WAL file is checked inside the first write
 * transaction instead (`checkInTransaction`): a read-only connection would create -wal and -shm
 * files that are not ours to remove, since another process may be using them.
 */
const precheck = (filename: string, migrationsTable: string, latest: number) =>
  Effect.suspend(() => {
    if (filename === ":memory:" || filename === "" || filename.startsWith("file:")) return Effect.void
    const stat = fs.statSync(filename, { throwIfNoEntry: false })
    if (stat === undefined || (stat.isFile() && stat.size === 0)) return Effect.void
    if (stat.isDirectory()) return openFailed(filename)(Cause.die(new Error(`${filename} is a directory`)))
    return Effect.try({
      try: (): Contents | undefined => {
        if (isWalFile(filename)) return undefined
        const db = new Database(filename, { readonly: true, fileMustExist: true })
        try {
          const tables = db.prepare(contentsQuery).all().map((row) => (row as { readonly name: string }).name)
          if (tables.length === 0) return { tables, version: 0 }
          if (!tables.includes(migrationsTable)) return { tables, version: null }
          const row = db.prepare(`SELECT MAX(migration_id) AS version FROM "${migrationsTable}"`).get() as { readonly version: number | null }
          return { tables, version: row.version ?? 0 }
        } finally {
          db.close()
        }
      },
      catch: (cause) => new SqlError({ cause, message: `cannot read ${JSON.stringify(filename)} as a SQLite database` })
    }).pipe(Effect.flatMap((contents) => (contents === undefined ? Effect.void : checkContents(filename, migrationsTable, latest)(contents))))
  })

/** The same check through the store's own client, inside its write transaction. */
const checkInTransaction = (sql: SqlClient.SqlClient, filename: string, migrationsTable: string, latest: number) =>
  Effect.gen(function*() {
    const tables = (yield* sql.unsafe<{ readonly name: string }>(contentsQuery)).map((row) => row.name)
    if (tables.length === 0) return
    if (!tables.includes(migrationsTable)) return yield* checkContents(filename, migrationsTable, latest)({ tables, version: null })
    const [row] = yield* sql<{ readonly version: number | null }>`SELECT MAX(migration_id) AS version FROM ${sql(migrationsTable)}`
    return yield* checkContents(filename, migrationsTable, latest)({ tables, version: row?.version ?? 0 })
  })

/**
 * Opens a SQLite store and applies its migrations (recorded in `migrationsTable`) inside one
 * write transaction, so concurrent processes opening the same new file do not race.
 */
export const open = (
  options: SqliteStoreOptions,
  migrations: Record<string, Effect.Effect<void, SqlError, SqlClient.SqlClient>>,
  migrationsTable: string
): Effect.Effect<Store, OpenError, Scope.Scope> =>
  Effect.gen(function*() {
    const requested = options.busyTimeoutMillis ?? DefaultBusyTimeoutMillis
    if (!Number.isSafeInteger(requested) || requested < 0) {
      return yield* Effect.fail(
        new InvalidInput({ operation: "open", message: `busyTimeoutMillis must be a whole number of milliseconds ≥ 0, got ${requested}` })
      )
    }
    yield* precheck(options.filename, migrationsTable, latestMigration(migrations))
    const sql = yield* SqliteClient.make({ filename: options.filename }).pipe(
      Effect.provide(Reactivity.layer),
      Effect.catchAllDefect((defect) => openFailed(options.filename)(Cause.die(defect)))
    )
    const busy = requested
    yield* sql.unsafe(`PRAGMA busy_timeout = ${Math.min(busy, NativeBusyMillis)}`)
    yield* sql`PRAGMA synchronous = FULL`
    const store: Store = {
      sql,
      write: transaction(sql, "BEGIN IMMEDIATE", busy),
      read: transaction(sql, "BEGIN", busy)
    }
    yield* store.write(
      Effect.zipRight(
        checkInTransaction(sql, options.filename, migrationsTable, latestMigration(migrations)),
        Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: migrationsTable })
      )
    ).pipe(Effect.provideService(SqlClient.SqlClient, sql))
    return store
  })
