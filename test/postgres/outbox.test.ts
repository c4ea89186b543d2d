/**
 * The transactional outbox on PostgreSQL: the queue on the application's own `PgClient`, in the
 * application's schema, so that an application write and an enqueue commit together or not at
 * all. The enqueue locks only its own flow's row: while the application's transaction is open,
 * workers (other processes' queues on the same store) claim, settle and enqueue every other flow,
 * and see the new event only once the application commits. The wrong uses fail loudly.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber, Redacted } from "effect"
import { expect } from "vitest"
import * as PgRelayQueue from "../../src/layers/PgRelayQueue.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

/** The application: its own client on a fresh schema, its own table, the queue on its client. */
const app = (url: string, claims?: "exact" | "parallel") =>
  Effect.gen(function*() {
    const schema = yield* freshSchema(url)
    const sql = yield* PgClient.make({ url: Redacted.make(schema.url), maxConnections: 4 }).pipe(Effect.provide(Reactivity.layer))
    yield* sql`CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`
    const queue = yield* PgRelayQueue.makeClient(claims === undefined ? {} : { claims }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
    return { sql, queue, schema }
  })

const placeOrder = (sql: SqlClient.SqlClient, id: string, flowId = id) =>
  Effect.zipRight(
    sql`INSERT INTO orders (id, total) VALUES (${id}, 3)`,
    Effect.flatMap(RelayQueue, (queue) => queue.enqueue({ eventId: `${id}:created`, flowId, body: { delta: 3 } }))
  )

const causeTag = (exit: Exit.Exit<unknown, unknown>) => {
  const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : undefined
  const error = failure?._tag === "Some" ? failure.value as { _tag?: string; cause?: { _tag?: string } } : undefined
  return `${error?._tag}/${error?.cause?._tag}`
}

describePg("PgRelayQueue.layerClient: the queue in the application's PostgreSQL database", (url) => {
  it.scopedLive("an order and its event commit together; a failure after both writes stores neither, and leaves no gap", () =>
    Effect.gen(function*() {
      const { queue, sql } = yield* app(url)
      const inTransaction = <A, E>(effect: Effect.Effect<A, E, RelayQueue>) =>
        sql.withTransaction(effect).pipe(Effect.provideService(RelayQueue, queue), Effect.exit)
      expect(yield* inTransaction(placeOrder(sql, "order-1"))).toEqual(Exit.succeed({ _tag: "Enqueued", seq: 1 }))
      const failed = yield* inTransaction(Effect.zipRight(placeOrder(sql, "order-2", "order-1"), Effect.fail("payment declined" as const)))
      expect(failed).toEqual(Exit.fail("payment declined"))
      expect(yield* sql`SELECT id FROM orders ORDER BY id`).toEqual([{ id: "order-1" }])
      // The next order of the flow takes seq 2: the rolled-back one left nothing behind.
      expect(yield* inTransaction(placeOrder(sql, "order-3", "order-1"))).toEqual(Exit.succeed({ _tag: "Enqueued", seq: 2 }))
      const snapshot = yield* queue.snapshot
      expect(snapshot.events.map((e) => [e.eventId, e.seq])).toEqual([["order-1:created", 1], ["order-3:created", 2]])
      const tables = (yield* sql<{ name: string }>`SELECT table_name AS name FROM information_schema.tables
        WHERE table_schema = current_schema() ORDER BY 1`).map((r) => r.name)
      expect(tables).toEqual(expect.arrayContaining(["orders", "relay_event", "relay_migrations"]))
    }))

  it.scopedLive("while the application's transaction is open, workers go on with every other flow and see its event only after the commit", () =>
    Effect.gen(function*() {
      const { queue, schema, sql } = yield* app(url)
      // A worker elsewhere: its own pool on the same store (it adopts the store's parallel claims).
      const worker = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 2 })
      yield* worker.enqueueBatch([{ eventId: "A1", flowId: "A", body: {} }, { eventId: "B1", flowId: "B", body: {} }])
      const enqueued = yield* Deferred.make<void>()
      const commit = yield* Deferred.make<void>()
      const application = yield* Effect.fork(
        sql.withTransaction(Effect.zipRight(
          Effect.zipRight(placeOrder(sql, "order-9", "A"), Deferred.succeed(enqueued, undefined)),
          Deferred.await(commit)
        )).pipe(Effect.provideService(RelayQueue, queue))
      )
      yield* Deferred.await(enqueued)
      // The application holds flow A's row: the worker's enqueues of other flows and its claims go on.
      yield* worker.enqueue({ eventId: "C1", flowId: "C", body: {} }).pipe(Effect.timeout("5 seconds"))
      const first = yield* worker.claim.pipe(Effect.timeout("5 seconds"))
      const second = yield* worker.claim.pipe(Effect.timeout("5 seconds"))
      const claimed = [first, second].map((o) => (o._tag === "Claimed" ? o.event.eventId : o._tag))
      expect(claimed).toEqual(["B1", "C1"])
      for (const o of [first, second]) if (o._tag === "Claimed") yield* worker.settle(o.token, { _tag: "Accepted" })
      expect((yield* worker.snapshot).events.map((e) => e.eventId)).not.toContain("order-9:created")
      yield* Deferred.succeed(commit, undefined)
      yield* Fiber.join(application)
      // Committed: A's head, then the order's event behind it.
      const a1 = yield* worker.claim
      expect(a1._tag === "Claimed" ? a1.event.eventId : a1._tag).toBe("A1")
      if (a1._tag === "Claimed") yield* worker.settle(a1.token, { _tag: "Accepted" })
      const order = yield* worker.claim
      expect(order._tag === "Claimed" ? [order.event.eventId, order.event.seq] : order._tag).toEqual(["order-9:created", 2])
    }))

  it.scopedLive("claims inside the application's transaction, and an enqueue there on a store with exact claims, are refused", () =>
    Effect.gen(function*() {
      const { queue, sql } = yield* app(url)
      const claimInside = yield* sql.withTransaction(queue.claim).pipe(Effect.exit)
      expect(causeTag(claimInside)).toBe("SqlError/TransactionMisuse")
      const exact = yield* app(url, "exact")
      const enqueueInside = yield* exact.sql.withTransaction(placeOrder(exact.sql, "order-5")).pipe(
        Effect.provideService(RelayQueue, exact.queue),
        Effect.exit
      )
      expect(causeTag(enqueueInside)).toBe("SqlError/TransactionMisuse")
      expect(yield* exact.sql`SELECT id FROM orders`).toEqual([])
      // Outside a transaction the exact store enqueues in one of its own.
      const alone = yield* exact.queue.enqueue({ eventId: "x1", flowId: "x", body: {} })
      expect(alone._tag).toBe("Enqueued")
    }))

  it.scopedLive("a client of another database kind is refused", () =>
    Effect.gen(function*() {
      const { SqliteClient } = yield* Effect.promise(() => import("@effect/sql-sqlite-node"))
      const sqlite = yield* SqliteClient.make({ filename: ":memory:" }).pipe(Effect.provide(Reactivity.layer))
      const refused = yield* Effect.flip(PgRelayQueue.makeClient().pipe(Effect.provideService(SqlClient.SqlClient, sqlite)))
      expect(refused._tag).toBe("InvalidInput")
    }))
})
