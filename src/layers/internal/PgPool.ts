/**
 * The pool of a PostgreSQL store that owns its connections, and the `@effect/sql` client over it
 * (`PgClient.fromPool`). The store's transactions take their connection from the pool directly
 * (`Reserver`) and give it back by hand: `sql.reserve` hands a connection back through a `Scope`
 * (made, provided, closed — its finalizers gathered and run), work every transaction would pay
 * for nothing on the hot path of every worker step; and the one a
 * transaction gives back is kept for the next (`reserverOf`). The
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

/** What `pg.Pool.connect` answers a caller that passes a callback. */
type Connected = (error: Error | undefined, client?: pg.PoolClient, done?: pg.PoolClient["release"]) => void

/**
 * The reserver of `pool`'s connections, made like those `sql.reserve` answers (their class, taken
 * from one it answers). A client that reports an error while it is out of the pool (its server
 * connection lost) is given back with it, and the pool discards it, as `sql.reserve` does.
 *
 * A connection a transaction gives back is kept for the next one (`spare`) while nobody waits for
 * one: taking it is one step, where the pool answers a taker on a later tick through a timer of
 * its checkout timeout (and sets another, its idle timeout, on every give-back). Every taker of
 * the pool's connections takes the spare first (`pool.connect` is wrapped: the client's own
 * statements, `sql.reserve`), so it is never out of reach of one; one that is no longer usable is
 * discarded as it is taken; it goes back to the pool as the scope closes, before the pool ends.
 */
const reserverOf = (pool: pg.Pool, sql: PgClient.PgClient): Effect.Effect<Reserver | undefined, SqlError, Scope.Scope> =>
  Effect.flatMap(Effect.scoped(sql.reserve), (sample) => {
    const Made = (sample as unknown as { readonly constructor: new(client: pg.PoolClient) => PooledConnection }).constructor
    const client = (sample as Partial<PooledConnection>).pg
    if (client === undefined || new Made(client).pg !== client) return Effect.succeed(undefined)
    const errors = new WeakMap<pg.PoolClient, Error>()
    // One listener for every client (it is called with the client as `this`).
    function onError(this: pg.PoolClient, error: Error) {
      errors.set(this, error)
    }
    /** Gives `client` back to the pool, with the error it reported (the pool then discards it). */
    const giveBack = (client: pg.PoolClient, error?: Error) => {
      client.off("error", onError)
      const reported = errors.get(client)
      errors.delete(client)
      client.release(reported ?? error)
    }
    const usable = (client: pg.PoolClient) => {
      const state = client as unknown as { readonly _queryable?: boolean; readonly _ending?: boolean }
      return !errors.has(client) && state._queryable !== false && state._ending !== true
    }
    let spare: pg.PoolClient | undefined
    /** The spare, if it is still usable (one that is not is discarded). */
    const takeSpare = (): pg.PoolClient | undefined => {
      const client = spare
      spare = undefined
      if (client === undefined || usable(client)) return client
      giveBack(client, new Error("the connection closed while it was kept for the next transaction"))
      return undefined
    }
    const connect = pool.connect.bind(pool) as (callback?: Connected) => Promise<pg.PoolClient> | void
    pool.connect = ((callback?: Connected) => {
      const client = takeSpare()
      if (client === undefined) return connect(callback)
      client.off("error", onError)
      // Answered on a later tick, as the pool answers.
      if (callback === undefined) return Promise.resolve(client)
      process.nextTick(() => callback(undefined, client, client.release))
    }) as typeof pool.connect
    const fresh = Effect.async<PooledConnection, SqlError>((resume) => {
      connect((error, client) => {
        if (error != null || client === undefined) {
          const cause = error ?? new Error("No client returned")
          return resume(Effect.fail(new SqlError({ cause, message: "Failed to acquire connection for transaction" })))
        }
        client.on("error", onError)
        resume(Effect.succeed(new Made(client)))
      })
    })
    const acquire = Effect.suspend(() => {
      const client = takeSpare()
      return client === undefined ? fresh : Effect.succeed(new Made(client))
    })
    const release = (connection: PooledConnection) => {
      const client = connection.pg
      if (spare === undefined && pool.waitingCount === 0 && !pool.ending && usable(client)) spare = client
      else giveBack(client)
    }
    return Effect.as(
      Effect.addFinalizer(() =>
        Effect.sync(() => {
          const client = takeSpare()
          if (client !== undefined) giveBack(client)
        })
      ),
      { acquire, release }
    )
  })
