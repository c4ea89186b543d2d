/**
 * What a SQL backend gives the shared queue and inbox code: a client, and transactions that
 * hold the write lock from their first statement (writes) or read one consistent state (reads).
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import type { Effect } from "effect"

/** A SQL store opened by one backend. */
export interface Store {
  readonly sql: SqlClient
  /** Runs `effect` in a transaction that holds the store's write lock from its start. */
  readonly write: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
  /** Runs `effect` in a transaction that sees one consistent state. */
  readonly read: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
}

/** SQL integers may come back as strings (PostgreSQL int8) or bigints; the protocol uses numbers. */
export const int = (value: unknown): number => (typeof value === "number" ? value : Number(value))

/** A nullable SQL integer. */
export const intOrNull = (value: unknown): number | null => (value === null || value === undefined ? null : int(value))
