/**
 * Opening a SQLite store: `@effect/sql-sqlite-node`'s client, one connection per store (each store
 * owns its client), WAL (the client's default journal mode) with `synchronous=FULL`, a busy
 * timeout, and `BEGIN IMMEDIATE` write transactions.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import type { Connection } from "@effect/sql/SqlConnection"
import Database from "better-sqlite3"
import * as fs from "node:fs"
import { InvalidInput } from "../../domain/Errors.js"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { Cause, Clock, Context, Duration, Effect, Exit, Schedule } from "effect"
import type { Scope } from "effect"
import * as StoreCheck from "./StoreCheck.js"
import { alone, causeOf, execOnConnection, insideTransaction, isolated, isSqlite, misuse } from "./Store.js"
import type { Migrations, OpenError, Store } from "./Store.js"

export { TransactionMisuse } from "./Store.js"

/** Options common to every SQLite store. */
export interface SqliteStoreOptions {
  /** Path of the database file, or ":memory:". */
  readonly filename: string
  /** How long a write waits for another process's write lock before failing with SQLITE_BUSY (default 5000 ms). */
  readonly busyTimeoutMillis?: number | undefined
  /**
   * When a commit reaches the disk. "full" (default): every commit is fsynced before it returns —
   * an acknowledged write survives power loss. "normal" (WAL NORMAL): commits are fsynced at
   * checkpoints — a process crash loses nothing, a power loss or OS crash may lose the last
   * commits (never corrupts the file).
   */
  readonly synchronous?: "full" | "normal" | undefined
}

/** Default busy timeout. */
export const DefaultBusyTimeoutMillis = 5_000

/** Wait SQLite itself spends on a lock before answering SQLITE_BUSY (it blocks the event loop). */
const NativeBusyMillis = 10

const isBusy = (error: SqlError): boolean => ["SQLITE_BUSY", "SQLITE_LOCKED"].includes(causeOf(error, "code") ?? "")

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

/**
 * Checks a store's options before anything touches the file (a store on the application's client
 * has no filename): a value of the wrong kind is an `InvalidInput` naming it. Answers the busy timeout.
 */
const checkOptions = (options: Partial<SqliteStoreOptions>, file = true): Effect.Effect<number, InvalidInput> => {
  const invalid = (message: string) => Effect.fail(new InvalidInput({ operation: "open", message }))
  const busy = options.busyTimeoutMillis ?? DefaultBusyTimeoutMillis
  if (file && typeof options.filename !== "string") return invalid(`filename must be a path or ":memory:", got ${JSON.stringify(options.filename)}`)
  if (options.synchronous !== undefined && options.synchronous !== "full" && options.synchronous !== "normal") {
    return invalid(`synchronous must be "full" or "normal", got ${JSON.stringify(options.synchronous)}`)
  }
  return Number.isSafeInteger(busy) && busy >= 0
    ? Effect.succeed(busy)
    : invalid(`busyTimeoutMillis must be a whole number of milliseconds ≥ 0, got ${JSON.stringify(busy)}`)
}

const noTransaction = (error: SqlError): boolean => /no transaction is active/.test(causeOf(error, "message") ?? "")

/**
 * A transaction on the store's one connection, as lean as it can be (the operation above it has
 * its span; a transaction costs two cached statements and a semaphore): `begin` (retried without
 * blocking while another process holds the lock), the body with the connection as its
 * `TransactionConnection` (so nested `withTransaction` calls become savepoints), then COMMIT —
 * or ROLLBACK on failure, defect or interruption.
 */
const transaction = (client: SqlClient.SqlClient, begin: string, busyTimeoutMillis: number) => {
  const run = (conn: Connection, statement: string) => conn.execute(statement, [], undefined)
  const start = (conn: Connection) =>
    Effect.catchIf(run(conn, begin), isBusy, () => retryBusy(busyTimeoutMillis)(run(conn, begin)))
  // A COMMIT that fails leaves SQLite's transaction open on our only connection; roll it back
  // so the next operation does not find itself inside a dead transaction.
  const commit = (conn: Connection) => run(conn, "COMMIT").pipe(Effect.tapError(() => Effect.ignore(run(conn, "ROLLBACK"))))
  // SQLite may already have rolled back (some errors do); that ROLLBACK's complaint must not
  // replace the real error.
  const rollback = (conn: Connection) => Effect.catchIf(run(conn, "ROLLBACK"), noTransaction, () => Effect.void)
  return <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
    isolated(
      Effect.uninterruptibleMask((restore) =>
        Effect.scoped(
          Effect.gen(function*() {
            const conn = yield* restore(client.reserve)
            yield* restore(start(conn))
            const exit = yield* Effect.exit(restore(Effect.provideService(effect, SqlClient.TransactionConnection, [conn, 0])))
            if (Exit.isSuccess(exit)) {
              yield* commit(conn)
              return exit.value
            }
            yield* rollback(conn)
            return yield* exit
          })
        )
      )
    )
}

/**
 * Reads a SQLite file's contents through its own short read-only connection, before any client
 * opens it (which could create or convert it). The file must exist. On a WAL file such a
 * connection may leave -wal/-shm side files; callers that must not leave them check WAL files
 * with `StoreCheck.inspect` inside a transaction instead.
 */
export const inspectFile = (filename: string, migrationsTable: string): Effect.Effect<StoreCheck.Contents, SqlError> =>
  Effect.try({
    try: () => {
      const db = new Database(filename, { readonly: true, fileMustExist: true })
      try {
        const tables = db.prepare<[], { readonly name: string }>(StoreCheck.sqliteTables).all().map((row) => row.name)
        return StoreCheck.classify(tables, migrationsTable, () => {
          const row = db.prepare<[], { readonly version: number | null }>(
            `SELECT MAX(migration_id) AS version FROM "${migrationsTable.replaceAll("\"", "\"\"")}"`
          ).get()
          return Number(row?.version ?? 0)
        })
      } finally {
        db.close()
      }
    },
    catch: (cause) => new SqlError({ cause, message: `cannot read ${JSON.stringify(filename)} as a SQLite database` })
  })

const openFailed = (filename: string) => (cause: Cause.Cause<never>) =>
  Effect.fail(new SqlError({ cause: Cause.squash(cause), message: `cannot open SQLite store ${JSON.stringify(filename)}` }))

/** `@effect/sql-sqlite-node`'s client on one connection to the file (WAL unless disabled). */
const client = (config: SqliteClient.SqliteClientConfig) =>
  SqliteClient.make(config).pipe(
    Effect.provide(Reactivity.layer),
    Effect.catchAllDefect((defect) => openFailed(config.filename)(Cause.die(defect)))
  )

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
 * transaction instead (`StoreCheck.inspect`): a read-only connection would create -wal and -shm
 * files that are not ours to remove, since another process may be using them.
 */
const precheck = (filename: string, migrationsTable: string, latest: number) =>
  Effect.suspend(() => {
    if (filename === ":memory:" || filename === "" || filename.startsWith("file:")) return Effect.void
    const stat = fs.statSync(filename, { throwIfNoEntry: false })
    if (stat === undefined || (stat.isFile() && stat.size === 0)) return Effect.void
    if (stat.isDirectory()) return openFailed(filename)(Cause.die(new Error(`${filename} is a directory`)))
    return Effect.try({
      try: () => isWalFile(filename),
      catch: (cause) => new SqlError({ cause, message: `cannot read ${JSON.stringify(filename)} as a SQLite database` })
    }).pipe(
      Effect.flatMap((wal) =>
        wal ? Effect.void : Effect.flatMap(inspectFile(filename, migrationsTable), StoreCheck.refuse(filename, migrationsTable, latest))
      ),
      Effect.asVoid
    )
  })

/**
 * Refuses what this build must not open as a store (`StoreCheck.refuse`), then applies the
 * migrations, in one write transaction (`write`): processes opening one new file do not race.
 */
const migrate = (
  write: Store["write"],
  sql: SqlClient.SqlClient,
  label: string,
  migrations: Migrations,
  migrationsTable: string,
  options?: StoreCheck.RefuseOptions
) =>
  write(
    Effect.zipRight(
      Effect.flatMap(StoreCheck.inspect(sql, migrationsTable), StoreCheck.refuse(label, migrationsTable, StoreCheck.latestMigration(migrations), options)),
      Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: migrationsTable })
    )
  ).pipe(Effect.provideService(SqlClient.SqlClient, sql))

/** Opens a SQLite store and applies its migrations (recorded in `migrationsTable`, `migrate`). */
export const open = (
  options: SqliteStoreOptions,
  migrations: Migrations,
  migrationsTable: string
): Effect.Effect<Store, OpenError, Scope.Scope> =>
  Effect.gen(function*() {
    const busy = yield* checkOptions(options)
    const latest = StoreCheck.latestMigration(migrations)
    yield* precheck(options.filename, migrationsTable, latest)
    const sql = yield* client({ filename: options.filename })
    yield* sql.unsafe(`PRAGMA busy_timeout = ${Math.min(busy, NativeBusyMillis)}`)
    yield* sql.unsafe(`PRAGMA synchronous = ${options.synchronous === "normal" ? "NORMAL" : "FULL"}`)
    const store: Store = {
      sql,
      client: sql,
      write: transaction(sql, "BEGIN IMMEDIATE", busy),
      read: transaction(sql, "BEGIN", busy),
      exec: execOnConnection
    }
    yield* migrate(store.write, sql, options.filename, migrations, migrationsTable)
    return store
  })

/**
 * Opens an existing SQLite store read-only (SQLITE_OPEN_READONLY: nothing can create, migrate or
 * change the file): its reads work; its `write` fails with a `SqlError` caused by `ReadonlyStore`.
 * The store must exist at this build's schema version; anything else is an `IncompatibleStore`.
 */
export const openReadonly = (
  options: SqliteStoreOptions,
  migrations: Migrations,
  migrationsTable: string
): Effect.Effect<Store, OpenError, Scope.Scope> =>
  Effect.gen(function*() {
    const busy = yield* checkOptions(options)
    const stat = fs.statSync(options.filename, { throwIfNoEntry: false })
    if (stat === undefined || !stat.isFile()) {
      return yield* openFailed(options.filename)(Cause.die(new Error(`${options.filename} is not an existing file`)))
    }
    const latest = StoreCheck.latestMigration(migrations)
    // WAL is the store's own mode; a read-only connection must not try to set it.
    const sql = yield* client({ filename: options.filename, readonly: true, disableWAL: true })
    yield* sql.unsafe(`PRAGMA busy_timeout = ${Math.min(busy, NativeBusyMillis)}`)
    yield* StoreCheck.inspect(sql, migrationsTable).pipe(
      Effect.flatMap(StoreCheck.refuse(options.filename, migrationsTable, latest)),
      Effect.flatMap(StoreCheck.readable(options.filename, latest, `${options.filename} holds no store yet`))
    )
    return {
      sql,
      client: sql,
      read: transaction(sql, "BEGIN", busy),
      write: StoreCheck.refuseWrite(options.filename),
      exec: execOnConnection
    } satisfies Store
  })


/** Marks a transaction that `withImmediateTransaction` began (it holds the write lock from its start). */
export class ImmediateTransaction extends Context.Reference<ImmediateTransaction>()("fair-relay/ImmediateTransaction", {
  defaultValue: () => false
}) {}


/**
 * Runs `effect` in a transaction of the application's SQLite client that takes the write lock at
 * its start (`BEGIN IMMEDIATE`, waiting out other writers for `busyTimeoutMillis`), so that an
 * application write and a queue enqueue commit together, or neither. A deferred `BEGIN` that
 * reads before it writes can fail with `SQLITE_BUSY` half-way under other writers.
 */
export const withImmediateTransaction = (sql: SqlClient.SqlClient, busyTimeoutMillis = DefaultBusyTimeoutMillis) => {
  const begin = transaction(sql, "BEGIN IMMEDIATE", busyTimeoutMillis)
  return <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
    begin(Effect.provideService(effect, ImmediateTransaction, true))
}

/**
 * A store over the application's own SQLite client (same file, same connection): its tables live
 * next to the application's, with their own migrations table, migrated here. `join` runs inside
 * the caller's transaction — which must come from `withImmediateTransaction` — or in one of its
 * own; `write` and `read` always run in their own and refuse to start inside the caller's.
 */
export const fromClient = (
  sql: SqlClient.SqlClient,
  migrations: Migrations,
  migrationsTable: string,
  options: Pick<SqliteStoreOptions, "busyTimeoutMillis"> = {}
): Effect.Effect<Store, OpenError> =>
  Effect.gen(function*() {
    if (!isSqlite(sql)) {
      return yield* Effect.fail(new InvalidInput({ operation: "layerClient", message: "the SqlClient in context is not a SQLite client" }))
    }
    const busy = yield* checkOptions(options, false)
    const own = transaction(sql, "BEGIN IMMEDIATE", busy)
    const ownRead = transaction(sql, "BEGIN", busy)
    const join = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
      Effect.flatMap(insideTransaction, (inside): Effect.Effect<A, E | SqlError, R> =>
        !inside
          ? own(effect)
          : Effect.flatMap(ImmediateTransaction, (immediate): Effect.Effect<A, E | SqlError, R> =>
            immediate
              ? effect
              : misuse(
                "enqueue",
                "the application's transaction did not take the write lock at its start; wrap it in SqliteRelayQueue.withImmediateTransaction"
              )))
    const store: Store = {
      sql,
      client: sql,
      write: alone(own, "write"),
      read: alone(ownRead, "read"),
      join,
      exec: execOnConnection
    }
    // The application's tables are expected here; only a queue schema newer than this library is refused.
    yield* migrate(own, sql, "the application's database", migrations, migrationsTable, { foreign: "allow" })
    return store
  })
