/**
 * The pool of a PostgreSQL store that owns its connections, and the `@effect/sql` client over it
 * (`PgClient.fromPool`). The store's transactions take their connection from the pool directly
 * (`Reserver`) and give it back by hand: `sql.reserve` hands a connection back through a `Scope`
 * (made, provided, closed — its finalizers gathered and run), which cost a transaction 29 runtime
 * steps (a daemon event with the PostgreSQL inbox, two transactions: 304.7 → 246.6). The
 * connection is the client's own kind (what `sql.reserve` answers), so the statements a
 * receiver's business runs on it go through `@effect/sql` as before.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Duration, Effect, Redacted } from "effect"
import type { Scope } from "effect"
import pg from "pg"

/** A connection of the pool as `@effect/sql-pg` makes it: its `pg` client, and statements run on it. */
export type PooledConnection = Connection & { readonly pg: pg.PoolClient }

/** Takes a connection of the pool for one transaction, and gives it back. */
export interface Reserver {
  /** A connection of the pool (waits while all are taken; has no canceller: run it uninterruptibly). */
  readonly acquire: Effect.Effect<PooledConnection, SqlError>
  /** Gives `connection` back to the pool (discarded if its client reported an error meanwhile); once per `acquire`. */
  readonly release: (connection: PooledConnection) => void
}

/**
 * A store's client and, where the store owns its pool (`make`), the reserver of the pool's
 * connections; a store on the application's client has none.
 */
export interface Pool {
  readonly sql: SqlClient.SqlClient
  readonly reserver?: Reserver | undefined
}

/** How to connect: what `PgStore` checked. */
export interface PoolOptions {
  readonly url: Redacted.Redacted
  readonly maxConnections: number
  readonly connectTimeout: Duration.Duration
  readonly applicationName: string
}

/**
 * Opens a pool as `PgClient.make` does (one connection tried at once: a server that does not
 * answer within `connectTimeout` is a `SqlError`), ended with the scope — its client, and the
 * `Reserver` of its connections. The reserver is undefined if this `@effect/sql-pg` makes its
 * connections otherwise than the reserver expects; the store then reserves through `sql.reserve`.
 */
export const make = (options: PoolOptions): Effect.Effect<Pool, SqlError, Scope.Scope> =>
  Effect.gen(function*() {
    const pool = yield* Effect.acquireRelease(
      Effect.sync(() => {
        const pool = new pg.Pool({
          connectionString: Redacted.value(options.url),
          connectionTimeoutMillis: Duration.toMillis(options.connectTimeout),
          max: options.maxConnections,
          application_name: options.applicationName
        })
        // An idle connection that fails is dropped by the pool; the error has no one else to reach.
        pool.on("error", () => {})
        return pool
      }),
      (pool) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000))
    )
    yield* Effect.tryPromise({
      try: () => pool.query("SELECT 1"),
      catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
    }).pipe(Effect.timeoutFail({
      duration: options.connectTimeout,
      onTimeout: () => new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
    }))
    const sql = yield* PgClient.fromPool({ acquire: Effect.succeed(pool) }).pipe(Effect.provide(Reactivity.layer))
    return { sql, reserver: yield* reserverOf(pool, sql) }
  })

/**
 * The reserver of `pool`'s connections, made like those `sql.reserve` answers (their class, taken
 * from one it answers). A client that reports an error while it is out of the pool (its server
 * connection lost) is given back with it, and the pool discards it, as `sql.reserve` does.
 */
const reserverOf = (pool: pg.Pool, sql: PgClient.PgClient): Effect.Effect<Reserver | undefined, SqlError> =>
  Effect.map(Effect.scoped(sql.reserve), (sample) => {
    const Made = (sample as unknown as { readonly constructor: new(client: pg.PoolClient) => PooledConnection }).constructor
    const client = (sample as Partial<PooledConnection>).pg
    if (client === undefined || new Made(client).pg !== client) return undefined
    const errors = new WeakMap<pg.PoolClient, Error>()
    // One listener for every client (it is called with the client as `this`).
    function onError(this: pg.PoolClient, error: Error) {
      errors.set(this, error)
    }
    const acquire = Effect.async<PooledConnection, SqlError>((resume) => {
      pool.connect((error, client) => {
        if (error != null || client === undefined) {
          const cause = error ?? new Error("No client returned")
          return resume(Effect.fail(new SqlError({ cause, message: "Failed to acquire connection for transaction" })))
        }
        client.on("error", onError)
        resume(Effect.succeed(new Made(client)))
      })
    })
    const release = (connection: PooledConnection) => {
      const client = connection.pg
      client.off("error", onError)
      const error = errors.get(client)
      errors.delete(client)
      client.release(error)
    }
    return { acquire, release }
  })
