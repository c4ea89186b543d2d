/**
 * The transactional outbox on SQLite: the queue on the application's own client, so that an
 * application write and an enqueue commit together or not at all (also when the enqueue is an
 * `EnqueueConflict`: the caller gets it typed, the application's write is rolled back) — and the
 * wrong uses (a deferred transaction, a claim inside the application's transaction) fail loudly
 * instead of deadlocking.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as Migrator from "@effect/sql/Migrator"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { describe, expect, it } from "@effect/vitest"
import { Cause, Context, Effect, Exit, Layer } from "effect"
import Database from "better-sqlite3"
import * as path from "node:path"
import { EnqueueConflict } from "../../src/domain/Errors.js"
import { seedPolicy } from "../../src/domain/Policy.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import type { EnqueueResult } from "../../src/domain/Outcomes.js"
import { tempDir } from "../support/backends.js"

/** The application: its own client on its own file, its own table and migrations. */
const app = Effect.gen(function*() {
  const dir = yield* tempDir
  const filename = path.join(dir, "app.db")
  const sql = yield* SqliteClient.make({ filename }).pipe(Effect.provide(Reactivity.layer))
  yield* Migrator.make({})({
    loader: Migrator.fromRecord({
      "1_orders": Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`)
    })
  }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
  const queue = yield* SqliteRelayQueue.makeClient({ policy: seedPolicy }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
  return { filename, sql, queue }
})

const placeOrder = (sql: SqlClient.SqlClient, id: string) =>
  Effect.zipRight(
    sql`INSERT INTO orders (id, total) VALUES (${id}, 3)`,
    Effect.flatMap(RelayQueue, (queue) => queue.enqueue({ eventId: `${id}:created`, flowId: id, body: { delta: 3 } }))
  )

/**
 * An application service whose interface needs nothing from the context: its implementation holds
 * the client and the queue, as a service built by a layer does.
 */
class Orders extends Context.Tag("test/Orders")<Orders, {
  readonly place: (id: string) => Effect.Effect<EnqueueResult, unknown>
}>() {}

const makeOrders = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const queue = yield* RelayQueue
  // Checked by `npm run typecheck`: the transaction adds no requirement, so this is the interface's type.
  const place = (id: string): Effect.Effect<EnqueueResult, unknown> =>
    SqliteRelayQueue.withImmediateTransaction(sql)(placeOrder(sql, id).pipe(Effect.provideService(RelayQueue, queue)))
  return Orders.of({ place })
})

const causeTag = (exit: Exit.Exit<unknown, unknown>) => {
  const failure = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : undefined
  const error = failure?._tag === "Some" ? failure.value as { _tag?: string; cause?: { _tag?: string } } : undefined
  return `${error?._tag}/${error?.cause?._tag}`
}

describe("SqliteRelayQueue.layerClient: the queue in the application's database", () => {
  it.scoped("an order and its event commit together in withImmediateTransaction", () =>
    Effect.gen(function*() {
      const { queue, sql } = yield* app
      const result = yield* SqliteRelayQueue.withImmediateTransaction(placeOrder(sql, "order-1")).pipe(
        Effect.provideService(RelayQueue, queue),
        Effect.provideService(SqlClient.SqlClient, sql)
      )
      expect(result).toEqual({ _tag: "Enqueued", seq: 1 })
      expect(yield* sql`SELECT id FROM orders`).toEqual([{ id: "order-1" }])
      const snapshot = yield* queue.snapshot
      expect(snapshot.events.map((e) => e.eventId)).toEqual(["order-1:created"])
      // The application's migrations and the queue's live side by side.
      const tables = (yield* sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`).map((r) => r.name)
      expect(tables).toEqual(expect.arrayContaining(["effect_sql_migrations", "orders", "relay_event", "relay_migrations"]))
    }))

  it.scoped("withImmediateTransaction(sql) composes into a service that holds its client, and takes the write lock at its start", () =>
    Effect.gen(function*() {
      const { filename, queue, sql } = yield* app
      const orders = yield* makeOrders.pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.provideService(RelayQueue, queue))
      expect(yield* orders.place("order-1")).toEqual({ _tag: "Enqueued", seq: 1 })
      expect(yield* sql`SELECT id FROM orders`).toEqual([{ id: "order-1" }])
      expect((yield* queue.snapshot).events.map((e) => e.eventId)).toEqual(["order-1:created"])
      // Before any statement of the body, another connection already cannot take the write lock.
      const other = new Database(filename, { timeout: 0 })
      yield* Effect.addFinalizer(() => Effect.sync(() => other.close()))
      const tryWrite = () => {
        try {
          other.exec("BEGIN IMMEDIATE")
          other.exec("ROLLBACK")
          return "locked by nobody"
        } catch (error) {
          return (error as { code?: string }).code
        }
      }
      expect(yield* SqliteRelayQueue.withImmediateTransaction(sql)(Effect.sync(tryWrite))).toBe("SQLITE_BUSY")
      expect(tryWrite()).toBe("locked by nobody")
    }))

  it.scoped("a failure after both writes rolls back the order and the event: neither is stored", () =>
    Effect.gen(function*() {
      const { queue, sql } = yield* app
      const exit = yield* SqliteRelayQueue.withImmediateTransaction(
        Effect.zipRight(placeOrder(sql, "order-2"), Effect.fail("payment declined" as const))
      ).pipe(Effect.provideService(RelayQueue, queue), Effect.provideService(SqlClient.SqlClient, sql), Effect.exit)
      expect(exit).toEqual(Exit.fail("payment declined"))
      expect(yield* sql`SELECT id FROM orders`).toEqual([])
      const snapshot = yield* queue.snapshot
      expect(snapshot.events).toEqual([])
      expect(snapshot.flows).toEqual([])
      // A later order of the same flow gets seq 1: no gap was left behind.
      yield* SqliteRelayQueue.withImmediateTransaction(placeOrder(sql, "order-2")).pipe(
        Effect.provideService(RelayQueue, queue),
        Effect.provideService(SqlClient.SqlClient, sql)
      )
      expect((yield* queue.snapshot).events.map((e) => [e.eventId, e.seq])).toEqual([["order-2:created", 1]])
    }))

  it.scoped("an EnqueueConflict inside the application's transaction rolls back the order and reaches the caller typed", () =>
    Effect.gen(function*() {
      const { queue, sql } = yield* app
      yield* SqliteRelayQueue.withImmediateTransaction(placeOrder(sql, "order-1")).pipe(
        Effect.provideService(RelayQueue, queue),
        Effect.provideService(SqlClient.SqlClient, sql)
      )
      // The id "order-1:created" again, once with another body and once with another flow.
      const reuses = [
        { orderId: "order-1b", flowId: "order-1", body: { delta: 4 } },
        { orderId: "order-1c", flowId: "order-2", body: { delta: 3 } }
      ]
      for (const { body, flowId, orderId } of reuses) {
        const conflict = yield* SqliteRelayQueue.withImmediateTransaction(Effect.zipRight(
          sql`INSERT INTO orders (id, total) VALUES (${orderId}, 3)`,
          queue.enqueue({ eventId: "order-1:created", flowId, body })
        )).pipe(
          Effect.provideService(SqlClient.SqlClient, sql),
          // Typed: the caller catches it by its tag (this would not compile if it were not in the error channel).
          Effect.catchTag("EnqueueConflict", (error) => Effect.succeed(error))
        )
        expect(conflict).toBeInstanceOf(EnqueueConflict)
        expect(conflict).toMatchObject({ _tag: "EnqueueConflict", eventId: "order-1:created", storedFlowId: "order-1", storedSeq: 1 })
      }
      // Neither business write is stored, the queue is as it was (no flow "order-2"), and the
      // next event of the flow takes seq 2.
      expect(yield* sql`SELECT id FROM orders ORDER BY id`).toEqual([{ id: "order-1" }])
      const snapshot = yield* queue.snapshot
      expect(snapshot.events.map((e) => [e.eventId, e.flowId, e.seq, e.body])).toEqual([["order-1:created", "order-1", 1, { delta: 3 }]])
      expect(snapshot.flows.map((f) => f.flowId)).toEqual(["order-1"])
      expect(yield* queue.enqueue({ eventId: "order-1:paid", flowId: "order-1", body: {} })).toEqual({ _tag: "Enqueued", seq: 2 })
    }))

  it.scoped("an enqueue in a deferred transaction is refused (TransactionMisuse) and the application's transaction rolls back", () =>
    Effect.gen(function*() {
      const { queue, sql } = yield* app
      const exit = yield* sql.withTransaction(placeOrder(sql, "order-3")).pipe(Effect.provideService(RelayQueue, queue), Effect.exit)
      expect(causeTag(exit)).toBe("SqlError/TransactionMisuse")
      expect(yield* sql`SELECT id FROM orders`).toEqual([])
      expect((yield* queue.snapshot).events).toEqual([])
    }))

  it.scoped("claim, settle and redrive inside the application's transaction are refused instead of waiting for themselves", () =>
    Effect.gen(function*() {
      const { queue, sql } = yield* app
      yield* queue.enqueue({ eventId: "e1", flowId: "f", body: {} })
      const inside = (effect: Effect.Effect<unknown, unknown>) =>
        Effect.exit(SqliteRelayQueue.withImmediateTransaction(effect).pipe(Effect.provideService(SqlClient.SqlClient, sql)))
      expect(causeTag(yield* inside(queue.claim))).toBe("SqlError/TransactionMisuse")
      expect(causeTag(yield* inside(queue.settle({ eventId: "e1", generation: 1 }, { _tag: "Accepted" })))).toBe("SqlError/TransactionMisuse")
      expect(causeTag(yield* inside(queue.snapshot))).toBe("SqlError/TransactionMisuse")
      // Outside, the relay works as on its own file: the event is claimed and acked.
      const claimed = yield* queue.claim
      if (claimed._tag !== "Claimed") return expect.unreachable()
      expect(yield* queue.settle(claimed.token, { _tag: "Accepted" })).toEqual({ _tag: "Acked" })
    }))

  it.scoped("enqueueBatch joins the application's transaction too; outside one it takes its own", () =>
    Effect.gen(function*() {
      const { queue, sql } = yield* app
      const batch = [1, 2, 3].map((i) => ({ eventId: `b${i}`, flowId: "b", body: { i } }))
      const exit = yield* SqliteRelayQueue.withImmediateTransaction(
        Effect.zipRight(queue.enqueueBatch(batch), Effect.fail("abort" as const))
      ).pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.exit)
      expect(Exit.isFailure(exit)).toBe(true)
      expect((yield* queue.snapshot).events).toEqual([])
      expect(yield* queue.enqueueBatch(batch)).toEqual([1, 2, 3].map((seq) => ({ _tag: "Enqueued", seq })))
    }))

  it.scoped("a client that is not SQLite is refused at layer start", () =>
    Effect.gen(function*() {
      const { sql } = yield* app
      const notSqlite = { ...sql, onDialectOrElse: (options: { orElse: () => unknown }) => options.orElse() } as unknown as SqlClient.SqlClient
      const exit = yield* Effect.exit(Layer.build(SqliteRelayQueue.layerClient()).pipe(Effect.provideService(SqlClient.SqlClient, notSqlite)))
      expect(causeTag(exit)).toBe("InvalidInput/undefined")
    }))
})
