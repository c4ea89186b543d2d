/**
 * Opening a PostgreSQL store, on `@effect/sql-pg`'s client: its transactions (the store's own,
 * opened by their lock timeout and locks) and its migrations. Every `write` transaction first
 * takes a transaction-scoped advisory lock for the store, as the hot operations' server functions
 * do in exact mode (`PgFunctions`), so writes to one store are serialized exactly as SQLite's
 * single writer serializes them: a claim sees every committed claim before it, the
 * `(served, flow_id)` order is global, and no two workers can claim the same head.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Cause, Duration, Effect, Redacted } from "effect"
import type { Scope } from "effect"
import { alone, causeOf, commitFailuresAsErrors, isolated, isPostgres } from "./Store.js"
import type { Migrations, OpenError, Store } from "./Store.js"

export { TransactionMisuse } from "./Store.js"
import { InvalidInput } from "../../domain/Errors.js"
import type { KeysOf } from "../../domain/Options.js"
import * as StoreCheck from "./StoreCheck.js"

/** Options common to every PostgreSQL store. */
export interface PgStoreOptions {
  /** Connection URL, e.g. postgres://user@127.0.0.1:5432/db. */
  readonly url: string | Redacted.Redacted
  /** Largest number of pooled connections, a whole number ≥ 1 (default 10). */
  readonly maxConnections?: number | undefined
  /** How long a connection attempt may take, a positive duration (default 5 s). */
  readonly connectTimeout?: Duration.DurationInput | undefined
  /**
   * How long a write waits for the store's lock before failing with a `SqlError`, a positive
   * duration (default 30 s): a stalled writer elsewhere shows up as an error instead of a hang.
   */
  readonly lockTimeout?: Duration.DurationInput | undefined
  /**
   * Whose clock a queue reckons with: `"process"` (default, Effect's `Clock`, so `TestClock`
   * drives it) or `"database"` — the server's `clock_timestamp()`, read inside each transaction
   * once the store's lock is held, so that processes on hosts whose clocks disagree share one
   * time line (no `ClockRegressed`, no lease cut short by a host that runs ahead).
   */
  readonly time?: "process" | "database" | undefined
  /**
   * Accepted for stores opened by earlier versions' options, and without effect: the store's
   * statements are never named prepared statements, so any pooler mode carries them (see
   * docs/postgres.md, "Behind a connection pooler"). Must be a boolean when given.
   */
  readonly preparedStatements?: boolean | undefined
}

/** A PostgreSQL store: `write` holds the store's lock; `rowLockedWrite` does not (its statements lock rows). */
export interface PgStore extends Store {
  /**
   * A `READ COMMITTED` write transaction without the store's lock, retried from the start (up to
   * five times) when it lost a race the database detects: a unique violation of two inserts of one
   * new row, a deadlock, a serialization failure.
   */
  readonly rowLockedWrite: Store["write"]
  /** How long a write waits for a lock (`lockTimeout`), in milliseconds. */
  readonly lockTimeoutMillis: number
  /** Whether the store is on the application's own client (`fromClient`). */
  readonly onClient: boolean
}

const retryableCodes = new Set(["23505", "40P01", "40001"])

/** Whether a failed transaction (or call) lost a race and can run again from the start. */
export const isRetryable = (error: unknown): boolean => error instanceof SqlError && retryableCodes.has(causeOf(error, "code") ?? "")

/** `effect` run again from the start, up to four more times, while it fails having lost a race (`isRetryable`, as it rarely does). */
export const retryRaces = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.catchIf(effect, isRetryable, () => Effect.retry(effect, { times: 4, while: isRetryable }))

/** The server's clock in epoch milliseconds (`clock_timestamp()`: the time of the call, not of the transaction's start). */
const serverTime = (sql: SqlClient.SqlClient): Effect.Effect<number, SqlError> =>
  Effect.map(sql<{ readonly now: unknown }>`SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint AS now`, (rows) => Number(rows[0]!.now))

/** How a store connects, checked (`checkConnection`). */
interface Connection {
  readonly url: Redacted.Redacted
  readonly maxConnections: number
  readonly connectTimeout: Duration.Duration
}

/**
 * The connection options, checked before anything connects: a value of the wrong kind (a
 * missing url included) is an `InvalidInput` naming it, never a failed connection or a default.
 */
const checkConnection = (options: PgStoreOptions, operation: string): Effect.Effect<Connection, InvalidInput> => {
  const invalid = (message: string) => Effect.fail(new InvalidInput({ operation, message }))
  const { maxConnections = 10, url } = options
  if (typeof url !== "string" && !Redacted.isRedacted(url)) {
    return invalid(`url must be a connection URL (a string or a Redacted string), got ${JSON.stringify(url)}`)
  }
  if (!(Number.isSafeInteger(maxConnections) && maxConnections >= 1)) {
    return invalid(`maxConnections must be a whole number ≥ 1, got ${JSON.stringify(maxConnections)}`)
  }
  const connectTimeoutMillis = millisOf("connectTimeout", options.connectTimeout, Duration.seconds(5))
  if (typeof connectTimeoutMillis === "string") return invalid(connectTimeoutMillis)
  return Effect.succeed({
    url: Redacted.isRedacted(url) ? url : Redacted.make(url),
    maxConnections,
    connectTimeout: Duration.millis(connectTimeoutMillis)
  })
}

/**
 * A pooled client, once its options are checked (`checkConnection`); a connection that fails
 * (server down, database missing) is a `SqlError` with the server's reason as its cause.
 */
const connect = (options: PgStoreOptions): Effect.Effect<SqlClient.SqlClient, InvalidInput | SqlError, Scope.Scope> =>
  Effect.flatMap(checkConnection(options, "open"), (connection) =>
    PgClient.make({ ...connection, applicationName: "fair-relay" }).pipe(
      Effect.provide(Reactivity.layer),
      Effect.catchAllDefect((defect) =>
        Effect.fail(new SqlError({ cause: Cause.squash(Cause.die(defect)), message: "cannot open PostgreSQL store" })))
    ))

/**
 * Transactions of the store's own on `sql` (`@effect/sql`'s), each opened by `first` (its settings
 * and locks), outside any transaction of the caller's on another client (`isolated`).
 */
const transactions = (sql: SqlClient.SqlClient, first: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  isolated(commitFailuresAsErrors(sql.withTransaction(Effect.zipRight(sql.unsafe(first), effect))))

/** A read transaction: one consistent snapshot, refused writes. */
const readTransaction = (sql: SqlClient.SqlClient) => transactions(sql, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")

/** A SQL string literal. */
const quote = (text: string) => `'${text.replace(/'/g, "''")}'`

/**
 * Opens a PostgreSQL store and applies its migrations under the store's lock, so concurrent
 * processes opening a new database do not race.
 */
export const open = (
  options: PgStoreOptions,
  migrations: Migrations,
  migrationsTable: string,
  lockName: string
): Effect.Effect<PgStore, OpenError, Scope.Scope> =>
  Effect.gen(function*() {
    const checked = yield* checkOptions(options, "open")
    return yield* openOn(yield* connect(options), checked, migrations, migrationsTable, lockName, false)
  })

/** The options of a store on a client that is already open (the application's own). */
export type PgClientStoreOptions = Pick<PgStoreOptions, "lockTimeout" | "time" | "preparedStatements">

/** The keys of `PgClientStoreOptions`, for a layer's check of its own options (`Options.keysOnly`). */
export const clientStoreKeys: KeysOf<PgClientStoreOptions> = { lockTimeout: true, time: true, preparedStatements: true }

/** The keys of `PgStoreOptions`, for a layer's check of its own options (`Options.keysOnly`). */
export const storeKeys: KeysOf<PgStoreOptions> = { ...clientStoreKeys, url: true, maxConnections: true, connectTimeout: true }

/** A store's options, checked: what its transactions and clock are made from. */
interface Checked {
  readonly lockTimeoutMillis: number
  readonly serverTime: boolean
}

/** A duration option in whole milliseconds ≥ 1, or why it is not one. */
const millisOf = (name: string, input: unknown, fallback: Duration.Duration): number | string => {
  if (input === undefined) return Duration.toMillis(fallback)
  const duration = Duration.decodeUnknown(input)
  return duration._tag === "Some" && Duration.isFinite(duration.value) && Duration.toMillis(duration.value) > 0
    ? Math.max(1, Math.round(Duration.toMillis(duration.value)))
    : `${name} must be a finite positive duration (e.g. "30 seconds" or a number of milliseconds), got ${JSON.stringify(input)}`
}

/**
 * Checks the store's own options (those of a store on the application's client too) before
 * anything connects: a value of the wrong kind is an `InvalidInput` naming it, never a defect or
 * a silent default.
 */
const checkOptions = (options: PgClientStoreOptions, operation: string): Effect.Effect<Checked, InvalidInput> => {
  const invalid = (message: string) => Effect.fail(new InvalidInput({ operation, message }))
  const { preparedStatements, time } = options
  if (preparedStatements !== undefined && typeof preparedStatements !== "boolean") {
    return invalid(`preparedStatements must be true or false, got ${JSON.stringify(preparedStatements)}`)
  }
  if (time !== undefined && time !== "process" && time !== "database") {
    return invalid(`time must be "process" or "database", got ${JSON.stringify(time)}`)
  }
  const lockTimeoutMillis = millisOf("lockTimeout", options.lockTimeout, Duration.seconds(30))
  if (typeof lockTimeoutMillis === "string") return invalid(lockTimeoutMillis)
  return Effect.succeed({
    lockTimeoutMillis,
    serverTime: time === "database"
  })
}

/** Opens a store on an open client: its transactions, and its migrations applied under its lock. */
const openOn = (
  sql: SqlClient.SqlClient,
  { lockTimeoutMillis, serverTime: onServerTime }: Checked,
  migrations: Migrations,
  migrationsTable: string,
  lockName: string,
  onClient: boolean
): Effect.Effect<PgStore, OpenError> =>
  Effect.gen(function*() {
    // The transaction's lock timeout (`set_config(…, true)` is `SET LOCAL`: only the store's own
    // transactions, never the application's) and, for a write, the store's lock in the same
    // statement, taken once it holds (the setting is a subquery's row, made before the lock's row
    // reads it). The lock key is per schema and store kind: two stores of one database in
    // different schemas do not wait for each other.
    const settings = `SELECT set_config('lock_timeout', '${lockTimeoutMillis}', true) AS lock_timeout`
    const write = transactions(sql, `SELECT pg_advisory_xact_lock(hashtext(current_schema() || ${quote(`/${lockName}`)})) FROM (${settings} OFFSET 0) AS settings`)
    // Without the store's lock: the statements lock the rows they change (parallel claims).
    const rowLocked = transactions(sql, settings)
    const rowLockedWrite = <A, E, R>(effect: Effect.Effect<A, E, R>) => retryRaces(rowLocked(effect))
    const store: PgStore = {
      sql,
      client: sql,
      write,
      rowLockedWrite,
      lockTimeoutMillis,
      onClient,
      read: readTransaction(sql),
      exec: (statement) => statement,
      now: onServerTime ? serverTime(sql) : undefined
    }
    yield* write(
      Effect.gen(function*() {
        // A schema holds the application's tables too (and maybe the other kind of store): only
        // a newer schema of this kind is refused.
        yield* StoreCheck.inspect(sql, migrationsTable).pipe(
          Effect.flatMap(StoreCheck.refuse(`the PostgreSQL ${lockName} store`, migrationsTable, StoreCheck.latestMigration(migrations), { foreign: "allow" }))
        )
        // Created here so that the migrator finds it: a failed probe would abort the transaction.
        yield* sql`CREATE TABLE IF NOT EXISTS ${sql(migrationsTable)} (
          migration_id integer PRIMARY KEY, created_at timestamptz NOT NULL DEFAULT now(), name text NOT NULL)`
        yield* Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: migrationsTable })
      })
    ).pipe(Effect.provideService(SqlClient.SqlClient, sql))
    return store
  })

/**
 * A store on the application's own PostgreSQL client: its tables live next to the application's
 * (in the client's search path), with their own migrations table, migrated here. Its own
 * transactions refuse to start inside the application's (`TransactionMisuse`).
 */
export const fromClient = (
  sql: SqlClient.SqlClient,
  options: PgClientStoreOptions,
  migrations: Migrations,
  migrationsTable: string,
  lockName: string
): Effect.Effect<PgStore, OpenError> =>
  Effect.gen(function*() {
    if (!isPostgres(sql)) {
      return yield* new InvalidInput({ operation: "layerClient", message: "the SqlClient in context is not a PostgreSQL client" })
    }
    const checked = yield* checkOptions(options, "open")
    const store = yield* openOn(sql, checked, migrations, migrationsTable, lockName, true)
    return {
      ...store,
      write: alone(store.write, "write"),
      rowLockedWrite: alone(store.rowLockedWrite, "write"),
      read: alone(store.read, "read")
    }
  })

/**
 * Opens an existing PostgreSQL store read-only: nothing is created or migrated; reads run in
 * read-only transactions; `write` fails with a `SqlError` caused by `ReadonlyStore`. The store
 * must exist at this build's schema version; anything else is an `IncompatibleStore`.
 */
export const openReadonly = (
  options: PgStoreOptions,
  migrations: Migrations,
  migrationsTable: string,
  lockName: string
): Effect.Effect<Store, OpenError, Scope.Scope> =>
  Effect.gen(function*() {
    const checked = yield* checkOptions(options, "open")
    const sql = yield* connect(options)
    const label = `the PostgreSQL ${lockName} store`
    const latest = StoreCheck.latestMigration(migrations)
    yield* readTransaction(sql)(StoreCheck.inspect(sql, migrationsTable)).pipe(
      Effect.flatMap(StoreCheck.refuse(label, migrationsTable, latest, { foreign: "allow" })),
      Effect.flatMap(StoreCheck.readable(label, latest, `${label} does not exist in this database's current schema (no ${migrationsTable} table)`))
    )
    return {
      sql,
      client: sql,
      read: readTransaction(sql),
      write: StoreCheck.refuseWrite(label),
      exec: (statement) => statement,
      now: checked.serverTime ? serverTime(sql) : undefined
    } satisfies Store
  })
