/**
 * The connections of a store's pool (`PgPool`): a transaction takes its connection from the pool
 * and gives it back, so a pool of one connection serves transactions, the client's own statements
 * and `sql.reserve` in turn; one whose server connection ended meanwhile is not handed out again;
 * the pool closes them all as the store's scope closes.
 */
import { it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Redacted, Scope } from "effect"
import pg from "pg"
import { expect } from "vitest"
import * as PgPool from "../../src/layers/internal/PgPool.js"
import { describePg } from "./support.js"

/** A statement run by a client of its own (another process's view of the server). */
const onServer = <A extends object>(url: string, text: string, params: ReadonlyArray<unknown>) =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      return (await client.query<A>(text, [...params])).rows
    } finally {
      await client.end()
    }
  })

/** The server's connections of `application`. */
const connectionsOf = (url: string, application: string) =>
  Effect.map(
    onServer<{ pid: number }>(url, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", [application]),
    (rows) => rows.map((row) => row.pid)
  )

const terminate = (url: string, pids: ReadonlyArray<number>) =>
  onServer(url, "SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid", [pids])

describePg("PostgreSQL: the connections of a store's pool", (url) => {
  const open = (application: string) =>
    PgPool.make({ url: Redacted.make(url), maxConnections: 1, connectTimeout: Duration.seconds(5), applicationName: application })

  it.scopedLive("a pool of one connection: a transaction's connection goes back, the client's own statements and sql.reserve get it; closed with the scope", () =>
    Effect.gen(function*() {
      const application = `fr-pool-${process.pid}-a`
      const scope = yield* Scope.make()
      const { reserver, sql } = yield* Scope.extend(open(application), scope)
      expect(reserver).toBeDefined()
      for (let i = 0; i < 3; i++) {
        const connection = yield* Effect.uninterruptible(reserver!.acquire)
        const [row] = yield* connection.execute("SELECT 1 AS one", [], undefined) as Effect.Effect<ReadonlyArray<{ one: number }>>
        expect(row).toEqual({ one: 1 })
        reserver!.release(connection)
        // Back in the pool: the client's statements get it (one connection in all).
        expect(yield* sql<{ two: number }>`SELECT 2 AS two`.pipe(Effect.timeout("5 seconds"))).toEqual([{ two: 2 }])
        expect(yield* Effect.scoped(Effect.flatMap(sql.reserve, (reserved) => reserved.execute("SELECT 3 AS three", [], undefined)))
          .pipe(Effect.timeout("5 seconds"))).toEqual([{ three: 3 }])
      }
      const last = yield* Effect.uninterruptible(reserver!.acquire)
      reserver!.release(last)
      expect((yield* connectionsOf(url, application)).length).toBe(1)
      yield* Scope.close(scope, Exit.void)
      expect(yield* connectionsOf(url, application)).toEqual([])
    }))

  it.scopedLive("a connection whose server connection ended while in the pool is not handed out again: the next transaction gets a new one", () =>
    Effect.gen(function*() {
      const application = `fr-pool-${process.pid}-b`
      const { reserver, sql } = yield* open(application)
      const first = yield* Effect.uninterruptible(reserver!.acquire)
      reserver!.release(first)
      const [pid] = yield* connectionsOf(url, application)
      yield* terminate(url, [pid!])
      // The client learns of it when the server closes the socket.
      yield* Effect.sleep("200 millis")
      const next = yield* Effect.uninterruptible(reserver!.acquire)
      const rows = yield* next.execute("SELECT pg_backend_pid() AS pid", [], undefined) as Effect.Effect<ReadonlyArray<{ pid: number }>>
      reserver!.release(next)
      expect(rows[0]!.pid).not.toBe(pid)
      expect(yield* sql<{ one: number }>`SELECT 1 AS one`).toEqual([{ one: 1 }])
    }))

  it.scopedLive("a statement on a transaction's connection whose fiber is interrupted is cancelled at the server", () =>
    Effect.gen(function*() {
      const { reserver } = yield* PgPool.make({
        url: Redacted.make(url),
        maxConnections: 2,
        connectTimeout: Duration.seconds(5),
        applicationName: `fr-pool-${process.pid}-c`
      })
      const connection = yield* Effect.uninterruptible(reserver!.acquire)
      const sleeping = yield* Effect.fork(connection.execute("SELECT pg_sleep(30)", [], undefined))
      yield* Effect.sleep("300 millis")
      yield* Fiber.interrupt(sleeping)
      // Cancelled, the sleep no longer holds the connection: its next statement answers at once.
      const started = Date.now()
      expect(yield* connection.execute("SELECT 1 AS one", [], undefined).pipe(Effect.timeout("10 seconds"))).toEqual([{ one: 1 }])
      expect(Date.now() - started).toBeLessThan(5_000)
      reserver!.release(connection)
    }))
})
