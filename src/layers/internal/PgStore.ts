/**
 * Opening a PostgreSQL store. Every write transaction first takes a transaction-scoped advisory
 * lock for the store, so writes to one store are serialized exactly as SQLite's single writer
 * serializes them: a claim sees every committed claim before it, the `(served, flow_id)` order is
 * global, and no two workers can claim the same head.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Cause, Duration, Effect, Redacted } from "effect"
import type { Scope } from "effect"
import { commitFailuresAsErrors, isolated } from "./Store.js"
import type { OpenError, Store } from "./Store.js"
import { IncompatibleStore } from "../../domain/Errors.js"
import { latestMigration } from "./SqliteStore.js"

/** Options common to every PostgreSQL store. */
export interface PgStoreOptions {
  /** Connection URL, e.g. postgres://user@127.0.0.1:5432/db. */
  readonly url: string | Redacted.Redacted
  /** Largest number of pooled connections (default 10). */
  readonly maxConnections?: number | undefined
  /** How long a connection attempt may take (default 5 s). */
  readonly connectTimeout?: Duration.DurationInput | undefined
  /**
   * How long a write waits for the store's lock before failing with a `SqlError` (default 30 s):
   * a stalled writer elsewhere shows up as an error instead of a hang.
   */
  readonly lockTimeout?: Duration.DurationInput | undefined
}

/**
 * Opens a PostgreSQL store and applies its migrations under the store's lock, so concurrent
 * processes opening a new database do not race.
 */
export const open = (
  options: PgStoreOptions,
  migrations: Record<string, Effect.Effect<void, SqlError, SqlClient.SqlClient>>,
  migrationsTable: string,
  lockName: string
): Effect.Effect<Store, OpenError, Scope.Scope> =>
  Effect.gen(function*() {
    const sql = yield* PgClient.make({
      url: Redacted.isRedacted(options.url) ? options.url : Redacted.make(options.url),
      maxConnections: options.maxConnections ?? 10,
      connectTimeout: options.connectTimeout ?? Duration.seconds(5),
      applicationName: "fair-relay"
    }).pipe(
      Effect.provide(Reactivity.layer),
      Effect.catchAllDefect((defect) =>
        Effect.fail(new SqlError({ cause: Cause.squash(Cause.die(defect)), message: "cannot open PostgreSQL store" })))
    )
    // The lock key is per schema and store kind: two stores of one database in different schemas
    // do not wait for each other.
    const lockTimeoutMillis = Math.max(1, Math.round(Duration.toMillis(Duration.decode(options.lockTimeout ?? Duration.seconds(30)))))
    const lock = Effect.zipRight(
      sql.unsafe(`SET LOCAL lock_timeout = ${lockTimeoutMillis}`),
      sql`SELECT pg_advisory_xact_lock(hashtext(current_schema() || ${`/${lockName}`}))`
    )
    const write = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      isolated(commitFailuresAsErrors(sql.withTransaction(Effect.zipRight(lock, effect))))
    const read = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      isolated(commitFailuresAsErrors(sql.withTransaction(
        Effect.zipRight(sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY`, effect)
      )))
    const store: Store = { sql, write, read }
    yield* write(
      Effect.gen(function*() {
        // Created here so that the migrator finds it: a failed probe would abort the transaction.
        yield* sql`CREATE TABLE IF NOT EXISTS ${sql(migrationsTable)} (
          migration_id integer PRIMARY KEY, created_at timestamptz NOT NULL DEFAULT now(), name text NOT NULL)`
        const [row] = yield* sql<{ readonly version: unknown }>`SELECT MAX(migration_id) AS version FROM ${sql(migrationsTable)}`
        const version = Number(row?.version ?? 0)
        if (version > latestMigration(migrations)) {
          return yield* new IncompatibleStore({
            store: migrationsTable,
            message: `this schema was written by a newer version of fair-relay (schema ${version}; this one knows up to ${latestMigration(migrations)})`
          })
        }
        yield* Migrator.make({})({ loader: Migrator.fromRecord(migrations), table: migrationsTable })
      })
    ).pipe(Effect.provideService(SqlClient.SqlClient, sql))
    return store
  })
