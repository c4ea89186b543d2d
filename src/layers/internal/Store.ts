/**
 * What a SQL backend gives the shared queue and inbox code: a client, and transactions that
 * hold the write lock from their first statement (writes) or read one consistent state (reads).
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import type { MigrationError } from "@effect/sql/Migrator"
import { Context, Effect, Option } from "effect"
import type { IncompatibleStore, InvalidInput } from "../../domain/Errors.js"

/** Why a store could not be opened. */
export type OpenError = SqlError | MigrationError | InvalidInput | IncompatibleStore

/** A SQL store opened by one backend. */
export interface Store {
  readonly sql: SqlClient.SqlClient
  /** Runs `effect` in a transaction that holds the store's write lock from its start. */
  readonly write: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
  /** Runs `effect` in a transaction that sees one consistent state. */
  readonly read: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
}

/** SQL integers may come back as strings (PostgreSQL int8) or bigints; the protocol uses numbers. */
export const int = (value: unknown): number => (typeof value === "number" ? value : Number(value))

/** A nullable SQL integer. */
export const intOrNull = (value: unknown): number | null => (value === null || value === undefined ? null : int(value))

/**
 * The ambient transaction of another client (say, the application's own database) must never be
 * borrowed by ours: every store operation starts from a context without one.
 */
export const isolated = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.mapInputContext(effect, (context: Context.Context<R>) => Context.omit(SqlClient.TransactionConnection)(context) as Context.Context<R>)

/**
 * `@effect/sql` turns a failed COMMIT or ROLLBACK into a defect. A database failure is an error
 * the caller must see as one, so turn it back into a typed `SqlError`.
 */
export const commitFailuresAsErrors = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
  Effect.catchSomeDefect(effect, (defect) => (defect instanceof SqlError ? Option.some(Effect.fail(defect)) : Option.none()))

/**
 * Ids compare by their bytes in every backend (SQLite's BINARY collation; PostgreSQL's "C"),
 * so the `(served, flow_id)` order is the same everywhere and agrees with `Protocol.compareIds`.
 */
export const idType = (sql: SqlClient.SqlClient) =>
  sql.onDialectOrElse({ pg: () => sql.literal(`TEXT COLLATE "C"`), orElse: () => sql.literal("TEXT") })
