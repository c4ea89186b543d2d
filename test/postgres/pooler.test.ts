/**
 * Behind a pooler in transaction mode (FAIR_RELAY_PGBOUNCER_URL: PgBouncer with
 * `pool_mode = transaction`, as .ci/run starts it, sending every database name to the server of
 * FAIR_RELAY_PG_URL): each transaction may run on a different server connection, shared with
 * other processes. The store names no prepared statement, so nothing of a server connection
 * outlives the transaction that used it:
 *
 * - two queues (two pools, as two worker processes have) drain one store together through the
 *   pooler, in both claim modes, with the default options: every event once, each flow in
 *   order, no failure;
 * - the outbox on the application's own client through the pooler: an enqueue commits with the
 *   application's row or not at all.
 */
import { it } from "@effect/vitest"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect, Exit, Redacted } from "effect"
import { expect } from "vitest"
import { PgRelayQueue } from "../../src/index.js"
import type { RelayQueueService } from "../../src/services/RelayQueue.js"
import { describePooler } from "./support.js"

/** A fresh database on the server, dropped with the scope; its URL through the pooler. */
const freshDatabase = (admin: string, pooler: string) =>
  Effect.gen(function*() {
    const sql = yield* PgClient.make({ url: Redacted.make(admin), maxConnections: 1 }).pipe(Effect.provide(Reactivity.layer))
    const name = `fr_pooler_${process.pid}_${Date.now().toString(36)}`
    yield* Effect.acquireRelease(
      sql.unsafe(`CREATE DATABASE ${name}`),
      () => Effect.orDie(sql.unsafe(`DROP DATABASE ${name} WITH (FORCE)`))
    )
    const url = new URL(pooler)
    url.pathname = `/${name}`
    return url.toString()
  })

const flows = 8
const perFlow = 25

/** `flows` flows of `perFlow` events each, enqueued half through each queue. */
const fill = (queues: ReadonlyArray<RelayQueueService>) =>
  Effect.forEach(Array.from({ length: perFlow }, (_, seq) => seq), (seq) =>
    Effect.forEach(queues, (queue, q) =>
      queue.enqueueBatch(
        Array.from({ length: flows / queues.length }, (_, i) => {
          const flow = q * (flows / queues.length) + i
          return { eventId: `f${flow}-${seq + 1}`, flowId: `f${flow}`, body: { seq: seq + 1 } }
        })
      )), { discard: true })

/**
 * Workers of every queue claim and accept until their claims have found nothing for a second;
 * what they were handed, in order, and the steps that failed.
 */
const drain = (queues: ReadonlyArray<RelayQueueService>, workersPerQueue: number) =>
  Effect.gen(function*() {
    const delivered: Array<string> = []
    const failures: Array<unknown> = []
    const step = (queue: RelayQueueService) =>
      Effect.flatMap(queue.claim, (outcome) =>
        outcome._tag === "Claimed"
          ? Effect.as(Effect.zipRight(Effect.sync(() => delivered.push(outcome.event.eventId)), queue.settle(outcome.token, { _tag: "Accepted" })), true)
          : Effect.succeed(false))
    const worker = (queue: RelayQueueService) =>
      Effect.iterate(0, {
        while: (idle) => idle < 20,
        body: (idle) =>
          step(queue).pipe(
            Effect.map((claimed) => (claimed ? 0 : idle + 1)),
            Effect.catchAll((error) => Effect.sync(() => (failures.push(error), 0))),
            Effect.tap((idle) => (idle > 0 ? Effect.sleep("50 millis") : Effect.void))
          )
      })
    yield* Effect.forEach(queues.flatMap((queue) => Array.from({ length: workersPerQueue }, () => queue)), worker, {
      concurrency: "unbounded",
      discard: true
    })
    return { delivered, failures }
  })

/** Every event of the fill exactly once, each flow's in its order. */
const expectAllInOrder = (delivered: ReadonlyArray<string>) => {
  const all = Array.from({ length: flows }, (_, flow) => Array.from({ length: perFlow }, (_, i) => `f${flow}-${i + 1}`))
  expect([...delivered].sort()).toEqual(all.flat().sort())
  for (const [flow, events] of all.entries()) {
    expect(delivered.filter((id) => id.startsWith(`f${flow}-`))).toEqual(events)
  }
}

describePooler("PostgreSQL behind a pooler in transaction mode", (admin, pooler) => {
  for (const claims of ["exact", "parallel"] as const) {
    it.scopedLive(`${claims} claims: two pools drain one store, every event once, in order, no failure`, () =>
      Effect.gen(function*() {
        const url = yield* freshDatabase(admin, pooler)
        const queues = [
          yield* PgRelayQueue.make({ url, maxConnections: 4, claims }),
          yield* PgRelayQueue.make({ url, maxConnections: 4, claims })
        ]
        yield* fill(queues)
        const { delivered, failures } = yield* drain(queues, 4)
        expect(failures).toEqual([])
        expectAllInOrder(delivered)
      }), 60_000)
  }

  it.scopedLive("the outbox on the application's client: enqueues commit with the application's rows or not at all", () =>
    Effect.gen(function*() {
      const url = yield* freshDatabase(admin, pooler)
      // Two applications (two pools, as two processes have) over one database.
      const application = Effect.gen(function*() {
        const sql = yield* PgClient.make({ url: Redacted.make(url), maxConnections: 4 }).pipe(Effect.provide(Reactivity.layer))
        const queue = yield* PgRelayQueue.makeClient().pipe(Effect.provideService(SqlClient.SqlClient, sql))
        return { sql, queue }
      })
      const first = yield* application
      yield* first.sql`CREATE TABLE orders (id TEXT PRIMARY KEY)`
      const apps = [first, yield* application]
      const order = (n: number) => {
        const { queue, sql } = apps[n % 2]!
        return Effect.exit(sql.withTransaction(Effect.gen(function*() {
          yield* sql`INSERT INTO orders (id) VALUES (${`o${n}`})`
          yield* queue.enqueue({ eventId: `o${n}`, flowId: `customer-${n % 3}`, body: {} })
          if (n % 4 === 0) return yield* Effect.fail("rolled back" as const)
        })))
      }
      const placed = yield* Effect.forEach(Array.from({ length: 40 }, (_, i) => i + 1), (n) => Effect.map(order(n), (exit) => [`o${n}`, exit] as const), {
        concurrency: 8
      })
      // Every order commits with its event, but the ones that roll back (every fourth), typed.
      expect(placed.filter(([, exit]) => Exit.isFailure(exit) && !JSON.stringify(exit.cause).includes("rolled back"))).toEqual([])
      const committed = placed.filter(([, exit]) => Exit.isSuccess(exit)).map(([id]) => id)
      expect(committed).toHaveLength(30)
      expect((yield* first.sql<{ id: string }>`SELECT id FROM orders ORDER BY id`).map((row) => row.id)).toEqual([...committed].sort())
      const { delivered, failures } = yield* drain(apps.map((app) => app.queue), 2)
      expect(failures).toEqual([])
      expect([...delivered].sort()).toEqual([...committed].sort())
    }), 60_000)
})
