/**
 * Opening a PostgreSQL store. Every write transaction first takes a transaction-scoped advisory
 * lock for the store, so writes to one store are serialized exactly as SQLite's single writer
 * serializes them: a claim sees every committed claim before it, the `(served, flow_id)` order is
 * global, and no two workers can claim the same head.
 */
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { Cause, Duration, Effect, Predicate, Redacted } from "effect"
import type { Scope } from "effect"
import * as PgHeldWrites from "./PgHeldWrites.js"
import * as PgPool from "./PgPool.js"
import { PreparedStatements, transactions } from "./PgTransactions.js"
import { alone, commitFailuresAsErrors, insideTransaction, isPostgres, misuse } from "./Store.js"
import type { Migrations, OpenError, Store } from "./Store.js"

export { TransactionMisuse } from "./Store.js"
import { IncompatibleStore, InvalidInput } from "../../domain/Errors.js"
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
   * Whether the store's statements run as named prepared statements, parsed and planned once per
   * connection (default `true`). Set `false` behind a pooler in transaction mode that does not
   * carry prepared statements from one server connection to another (PgBouncer before 1.21, or
   * with `max_prepared_statements = 0`): each statement is then parsed where it runs, at some
   * cost in the server's CPU. See docs/postgres.md, "Behind a connection pooler".
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
  /** Runs statements as the store's `preparedStatements` says (what `write` and `read` do around theirs). */
  readonly statements: Statements
  /** How long a write waits for a lock (`lockTimeout`), in milliseconds. */
  readonly lockTimeoutMillis: number
}

const retryableCodes = new Set(["23505", "40P01", "40001"])

/** Whether a failed transaction lost a race and can run again from the start. */
const isRetryable = (error: unknown): boolean => {
  if (!(error instanceof SqlError)) return false
  return Predicate.hasProperty(error.cause, "code") && typeof error.cause.code === "string" && retryableCodes.has(error.cause.code)
}

/** The server's clock in epoch milliseconds (`clock_timestamp()`: the time of the call, not of the transaction's start). */
const serverTime = (sql: SqlClient.SqlClient, exec: PgHeldWrites.HeldWrites["exec"]): Effect.Effect<number, SqlError> =>
  Effect.map(
    exec(sql<{ readonly now: unknown }>`SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint AS now`),
    (rows) => Number(rows[0]!.now)
  )

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
const connect = (options: PgStoreOptions): Effect.Effect<PgPool.Pool, InvalidInput | SqlError, Scope.Scope> =>
  Effect.flatMap(checkConnection(options, "open"), (connection) =>
    PgPool.make({ ...connection, applicationName: "fair-relay" }).pipe(
      Effect.catchAllDefect((defect) =>
        Effect.fail(new SqlError({ cause: Cause.squash(Cause.die(defect)), message: "cannot open PostgreSQL store" })))
    ))

/** A read transaction: one consistent snapshot, refused writes. */
const readTransaction = ({ reserver, sql }: PgPool.Pool, statements: Statements) => {
  const transaction = transactions(sql, ["BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"], { reserver })
  return <A, E, R>(effect: Effect.Effect<A, E, R>) => statements(commitFailuresAsErrors(transaction(effect)))
}

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
    return yield* openOn(yield* connect(options), checked, migrations, migrationsTable, lockName)
  })

/** The options of a store on a client that is already open (the application's own). */
export type PgClientStoreOptions = Pick<PgStoreOptions, "lockTimeout" | "time" | "preparedStatements">

/** The keys of `PgClientStoreOptions`, for a layer's check of its own options (`Options.keysOnly`). */
export const clientStoreKeys: KeysOf<PgClientStoreOptions> = { lockTimeout: true, time: true, preparedStatements: true }

/** The keys of `PgStoreOptions`, for a layer's check of its own options (`Options.keysOnly`). */
export const storeKeys: KeysOf<PgStoreOptions> = { ...clientStoreKeys, url: true, maxConnections: true, connectTimeout: true }

/** Runs a transaction's statements as the store's options say (`preparedStatements`). */
type Statements = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>

/** A store's options, checked: what its transactions and clock are made from. */
interface Checked {
  readonly statements: Statements
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
    statements: preparedStatements === false
      ? <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.provideService(effect, PreparedStatements, false)
      : <A, E, R>(effect: Effect.Effect<A, E, R>) => effect,
    lockTimeoutMillis,
    serverTime: time === "database"
  })
}

/** Opens a store on an open client: its transactions, and its migrations applied under its lock. */
const openOn = (
  pooled: PgPool.Pool,
  { lockTimeoutMillis, serverTime: onServerTime, statements }: Checked,
  migrations: Migrations,
  migrationsTable: string,
  lockName: string
): Effect.Effect<PgStore, OpenError> =>
  Effect.gen(function*() {
    const { reserver, sql } = pooled
    // The lock key is per schema and store kind: two stores of one database in different schemas
    // do not wait for each other.
    // BEGIN, the transaction's settings and the store's lock: sent with the first statements.
    // The store's statements are prepared (`PgTransactions`) and every one of them is planned for
    // its indexes; with the server's default choice (`plan_cache_mode = auto`) the bulk writes
    // (rows as JSON, `LIMIT <count>`) were planned afresh on every call — their generic plan
    // looked costlier than a custom one for one row, and planning afresh was a large part of the
    // server's CPU per single-step event. A generic plan is made once per connection and made again
    // when the tables' statistics change. `SET LOCAL`: only the store's own transactions, never
    // the application's (an outbox enqueue runs in the application's transaction as it is).
    // Both settings in one statement (`set_config(…, true)` is `SET LOCAL`), and the store's lock
    // in the same one, taken once they hold (the settings are a subquery's row, made before the
    // lock's row reads it): a write transaction opens with two statements where it took four.
    const settings = `SELECT set_config('lock_timeout', '${lockTimeoutMillis}', true) AS lock_timeout, ` +
      "set_config('plan_cache_mode', 'force_generic_plan', true) AS plan_cache_mode"
    // Both hold the statements whose answers wait (`PgHeldWrites`), sent at the latest with COMMIT.
    const locked = transactions(sql, [
      "BEGIN",
      `SELECT pg_advisory_xact_lock(hashtext(current_schema() || ${quote(`/${lockName}`)})) FROM (${settings} OFFSET 0) AS settings`
    ], { holds: true, reserver })
    const write = <A, E, R>(effect: Effect.Effect<A, E, R>) => statements(commitFailuresAsErrors(locked(effect)))
    // Without the store's lock: the statements lock the rows they change (parallel claims).
    const rowLocked = transactions(sql, ["BEGIN", settings], { holds: true, reserver })
    // Retried from the start up to five times; `Effect.retry`'s schedule and driver (not free on
    // every call) only once a race was lost, as it rarely is.
    const rowLockedWrite = <A, E, R>(effect: Effect.Effect<A, E, R>) => {
      const once = statements(commitFailuresAsErrors(rowLocked(effect)))
      return Effect.catchIf(once, isRetryable, () => Effect.retry(once, { times: 4, while: isRetryable }))
    }
    const read = readTransaction(pooled, statements)
    const { exec, execLater, execWrite } = PgHeldWrites.make()
    const store: PgStore = {
      sql,
      client: sql,
      write,
      rowLockedWrite,
      statements,
      lockTimeoutMillis,
      read,
      exec,
      execWrite,
      execLater,
      now: onServerTime ? serverTime(sql, exec) : undefined
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
 * transactions refuse to start inside the application's (`TransactionMisuse`); `joinAmbient` makes
 * the `join` an enqueue runs in.
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
    const store = yield* openOn({ sql }, checked, migrations, migrationsTable, lockName)
    return {
      ...store,
      write: alone(store.write, "write"),
      rowLockedWrite: alone(store.rowLockedWrite, "write"),
      read: alone(store.read, "read")
    }
  })

/**
 * The `join` of a store on the application's client: inside the application's transaction, the
 * enqueue runs there when the store claims in parallel (it locks only its own flows' rows);
 * with exact claims it would hold the store-wide lock until the application commits, and is
 * refused. Outside, it runs in a transaction of its own (`own`).
 */
export const joinAmbient = (store: PgStore, parallel: boolean): Store["write"] => {
  const own = parallel ? store.rowLockedWrite : store.write
  // Inside, the enqueue's held writes are sent before it returns to the application.
  return (effect) =>
    Effect.flatMap(insideTransaction, (inside) =>
      !inside
        ? own(effect)
        : parallel
        ? store.statements(PgHeldWrites.holding(effect))
        : misuse(
          "enqueue",
          "an enqueue inside the application's transaction needs a store with parallel claims (claims: \"parallel\"); " +
            "with exact claims it would hold the store-wide lock until the application commits"
        ))
}

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
    const { statements } = checked
    const pooled = yield* connect(options)
    const { sql } = pooled
    const label = `the PostgreSQL ${lockName} store`
    const latest = StoreCheck.latestMigration(migrations)
    const contents = yield* readTransaction(pooled, statements)(StoreCheck.inspect(sql, migrationsTable)).pipe(
      Effect.flatMap(StoreCheck.refuse(label, migrationsTable, latest, { foreign: "allow" }))
    )
    if (contents._tag !== "Version" || contents.version !== latest) {
      return yield* new IncompatibleStore({
        store: label,
        message: contents._tag === "Version"
          ? `${label} has an older schema (${contents.version}; this version of fair-relay writes ${latest}): open it for writing once to upgrade it`
          : `${label} does not exist in this database's current schema (no ${migrationsTable} table)`
      })
    }
    const { exec } = PgHeldWrites.make()
    return {
      sql,
      client: sql,
      read: readTransaction(pooled, statements),
      write: StoreCheck.refuseWrite(label),
      exec,
      now: checked.serverTime ? serverTime(sql, exec) : undefined
    } satisfies Store
  })
