/**
 * The pool of a PostgreSQL store that owns its connections, and the `@effect/sql` client over it
 * (`PgClient.fromPool`). The store's transactions take their connection from the pool directly
 * (`Reserver`) and give it back by hand: `sql.reserve` hands a connection back through a `Scope`
 * (made, provided, closed — its finalizers gathered and run), work each transaction would pay
 * for nothing. The statements a receiver's business runs on the transaction's connection go
 * through `@effect/sql` as on one `sql.reserve` answers (`PooledConnection`).
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Connection } from "@effect/sql/SqlConnection"
import { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Duration, Effect, Redacted, Stream } from "effect"
import type { Scope } from "effect"
import pg from "pg"

/**
 * A connection of the pool for one transaction: its `pg` client, and statements run on it through
 * `@effect/sql` (`Connection`) as `@effect/sql-pg`'s own reserved connections run them — each a
 * `client.query`, cancelled at the server (`pg_cancel_backend`) if its fiber is interrupted.
 */
export class PooledConnection implements Connection {
  constructor(
    readonly pg: pg.PoolClient,
    private readonly cancels: WeakMap<pg.PoolClient, Effect.Effect<void>>
  ) {}
  private run<A>(text: string, params: ReadonlyArray<unknown>, rowMode: "array" | undefined, answer: (result: pg.QueryResult) => A) {
    return Effect.async<A, SqlError>((resume) => {
      const done = (error: Error | undefined, result: pg.QueryResult) =>
        resume(error ? Effect.fail(new SqlError({ cause: error, message: "Failed to execute statement" })) : Effect.succeed(answer(result)))
      if (rowMode === undefined) this.pg.query({ text, values: [...params] }, done)
      else this.pg.query({ text, values: [...params], rowMode }, done)
      return this.cancels.get(this.pg)
    })
  }
  private rows(sql: string, params: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<any>, SqlError> {
    // Several statements in one text answer one result each.
    return this.run(sql, params, undefined, (result) => Array.isArray(result) ? result.map((r: pg.QueryResult) => r.rows ?? []) : result.rows ?? [])
  }
  readonly execute: Connection["execute"] = (sql, params, transformRows) =>
    transformRows ? Effect.map(this.rows(sql, params), transformRows) : this.rows(sql, params)
  readonly executeRaw: Connection["executeRaw"] = (sql, params) => this.run(sql, params, undefined, (result): unknown => result)
  readonly executeValues: Connection["executeValues"] = (sql, params) =>
    this.run(sql, params, "array", (result): ReadonlyArray<ReadonlyArray<unknown>> => result.rows)
  readonly executeUnprepared: Connection["executeUnprepared"] = (sql, params, transformRows) => this.execute(sql, params, transformRows)
  /** The rows as a stream, read in one answer (the transaction's connection holds them all anyway until it ends). */
  readonly executeStream: Connection["executeStream"] = (sql, params, transformRows) =>
    Stream.fromIterableEffect(this.execute(sql, params, transformRows))
}

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
 * `Reserver` of its connections.
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
    const reserver = reserverOf(pool)
    yield* Effect.tryPromise({
      try: () => pool.query("SELECT 1"),
      catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
    }).pipe(Effect.timeoutFail({
      duration: options.connectTimeout,
      onTimeout: () => new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
    }))
    const sql = yield* PgClient.fromPool({ acquire: Effect.succeed(pool) }).pipe(Effect.provide(Reactivity.layer))
    return { sql, reserver }
  })

/** What `pg.Pool.connect` answers a caller that passes a callback. */
type Connected = (error: Error | undefined, client?: pg.PoolClient, done?: pg.PoolClient["release"]) => void

/**
 * The reserver of `pool`'s connections. A client that reports an error or ends while it is out of
 * the pool (its server connection lost: `pg` reports both as the client's events) is given back
 * with the error, and the pool discards it, as `sql.reserve` does.
 *
 * Each client's server process is asked for once, as the reserver first takes it
 * (`pg_backend_pid()`): a statement of a transaction whose fiber is interrupted is cancelled there,
 * as `@effect/sql-pg` cancels its own.
 */
const reserverOf = (pool: pg.Pool): Reserver => {
  const cancels = new WeakMap<pg.PoolClient, Effect.Effect<void>>()
  // What a client reported while out of the pool: an error, or its end.
  const lost = new WeakMap<pg.PoolClient, Error>()
  // One listener of each for every client (called with the client as `this`).
  function onError(this: pg.PoolClient, error: Error) {
    lost.set(this, error)
  }
  function onEnd(this: pg.PoolClient) {
    if (!lost.has(this)) lost.set(this, new Error("the connection ended"))
  }
  const listen = (client: pg.PoolClient) => client.on("error", onError).on("end", onEnd)
  const unlisten = (client: pg.PoolClient) => client.off("error", onError).off("end", onEnd)
  /** Gives `client` back to the pool, with what it reported (the pool then discards it). */
  const giveBack = (client: pg.PoolClient, error?: Error) => {
    unlisten(client)
    const reported = lost.get(client)
    lost.delete(client)
    client.release(reported ?? error)
  }
  const connect = pool.connect.bind(pool) as (callback: Connected) => void
  const connection = (client: pg.PoolClient) => new PooledConnection(client, cancels)
  const fresh = Effect.async<PooledConnection, SqlError>((resume) => {
    connect((error, client) => {
      if (error != null || client === undefined) {
        const cause = error ?? new Error("No client returned")
        return resume(Effect.fail(new SqlError({ cause, message: "Failed to acquire connection for transaction" })))
      }
      listen(client)
      if (cancels.has(client)) return resume(Effect.succeed(connection(client)))
      client.query<{ readonly pid: number }>("SELECT pg_backend_pid() AS pid", (error, result) => {
        const pid = result?.rows[0]?.pid
        if (error == null && typeof pid === "number") cancels.set(client, cancelOf(pool, pid))
        // A failure is the connection's: its first statement meets it.
        resume(Effect.succeed(connection(client)))
      })
    })
  })
  const release = (connection: PooledConnection) => giveBack(connection.pg)
  return { acquire: fresh, release }
}

/** Cancels what the server process `pid` runs, at best: through another connection of `pool`, within 5 seconds. */
const cancelOf = (pool: pg.Pool, pid: number): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    if (pool.ending) return resume(Effect.void)
    pool.query("SELECT pg_cancel_backend($1)", [pid], () => resume(Effect.void))
  }).pipe(Effect.interruptible, Effect.timeoutOption(5000), Effect.asVoid)
