/**
 * The transactional outbox on PostgreSQL: the queue on the application's own `PgClient`, in the
 * application's schema, so that an application write and an enqueue commit together or not at
 * all. The enqueue locks only its own flow's row: while the application's transaction is open,
 * workers (other processes' queues on the same store) claim, settle and enqueue every other flow,
 * and see the new event only once the application commits; two application transactions on
 * different flows enqueue side by side, and on one flow the second waits for the first's commit
 * (the server shows it blocked by the first's backend) and takes the next seq — or the first's
 * seq if the first rolls back. An `EnqueueConflict` rolls back the application's write and
 * reaches the caller typed. The wrong uses fail loudly.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { it } from "@effect/vitest"
import { Cause, Deferred, Effect, Exit, Fiber, Option, Redacted, Schedule } from "effect"
import { expect } from "vitest"
import { EnqueueConflict } from "../../src/domain/Errors.js"
import type { EnqueueResult } from "../../src/domain/Outcomes.js"
import * as PgRelayQueue from "../../src/layers/PgRelayQueue.js"
import type { RelayQueueService } from "../../src/services/RelayQueue.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

/** The application: its own client on a fresh schema, its own table, the queue on its client. */
const app = (url: string, claims?: "exact" | "parallel", maxConnections = 4) =>
  Effect.gen(function*() {
    const schema = yield* freshSchema(url)
    const sql = yield* PgClient.make({ url: Redacted.make(schema.url), maxConnections }).pipe(Effect.provide(Reactivity.layer))
    yield* sql`CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`
    const queue = yield* PgRelayQueue.makeClient(claims === undefined ? {} : { claims }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
    return { sql, queue, schema }
  })

const placeOrder = (sql: SqlClient.SqlClient, id: string, flowId = id) =>
  Effect.zipRight(
    sql`INSERT INTO orders (id, total) VALUES (${id}, 3)`,
    Effect.flatMap(RelayQueue, (queue) => queue.enqueue({ eventId: `${id}:created`, flowId, body: { delta: 3 } }))
  )

/**
 * An application transaction, forked, that places order `id` in `flowId` and then waits for
 * `finish` to commit or roll back. `started` is completed with the transaction's backend pid
 * just before the enqueue, `enqueued` with the enqueue's answer as soon as it returns.
 */
const openOrder = (sql: SqlClient.SqlClient, queue: RelayQueueService, id: string, flowId: string) =>
  Effect.gen(function*() {
    const started = yield* Deferred.make<number>()
    const enqueued = yield* Deferred.make<EnqueueResult>()
    const finish = yield* Deferred.make<"commit" | "rollback">()
    // Scoped: a failing test ends its transactions before the scope drops the schema.
    const fiber = yield* Effect.forkScoped(sql.withTransaction(Effect.gen(function*() {
      const [backend] = yield* sql<{ readonly pid: number }>`SELECT pg_backend_pid() AS pid`
      yield* sql`INSERT INTO orders (id, total) VALUES (${id}, 3)`
      yield* Deferred.succeed(started, backend!.pid)
      const result = yield* queue.enqueue({ eventId: `${id}:created`, flowId, body: { delta: 3 } })
      yield* Deferred.succeed(enqueued, result)
      if ((yield* Deferred.await(finish)) === "rollback") return yield* Effect.fail("rolled back" as const)
      return result
    })))
    return { started, enqueued, finish, fiber }
  })

/**
 * Whether the server reports backend `waiting` blocked by one of the backends `holders` (asked
 * for up to 5 s). A second waiter for a row lock is blocked by the first waiter, not the holder.
 */
const blockedBy = (sql: SqlClient.SqlClient, waiting: number, holders: ReadonlyArray<number>) =>
  sql<{ readonly blockers: ReadonlyArray<number> }>`SELECT pg_blocking_pids(${waiting}) AS blockers`.pipe(
    Effect.flatMap(([row]) => (row?.blockers ?? []).some((pid) => holders.includes(pid)) ? Effect.succeed(true) : Effect.fail("not yet" as const)),
    Effect.retry({ times: 100, schedule: Schedule.spaced("50 millis") }),
    Effect.orElseSucceed(() => false)
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

  it.scopedLive("an EnqueueConflict inside the application's transaction rolls back the order and reaches the caller typed", () =>
    Effect.gen(function*() {
      const { queue, sql } = yield* app(url)
      yield* sql.withTransaction(placeOrder(sql, "order-1")).pipe(Effect.provideService(RelayQueue, queue))
      // The id "order-1:created" again, once with another body and once with another flow.
      const reuses = [
        { orderId: "order-1b", flowId: "order-1", body: { delta: 4 } },
        { orderId: "order-1c", flowId: "order-2", body: { delta: 3 } }
      ]
      for (const { body, flowId, orderId } of reuses) {
        const conflict = yield* sql.withTransaction(Effect.zipRight(
          sql`INSERT INTO orders (id, total) VALUES (${orderId}, 3)`,
          queue.enqueue({ eventId: "order-1:created", flowId, body })
        )).pipe(
          // Typed: the caller catches it by its tag (this would not compile if it were not in the error channel).
          Effect.catchTag("EnqueueConflict", (error) => Effect.succeed(error))
        )
        expect(conflict).toBeInstanceOf(EnqueueConflict)
        expect(conflict).toMatchObject({ _tag: "EnqueueConflict", eventId: "order-1:created", storedFlowId: "order-1", storedSeq: 1 })
      }
      // Neither business write is stored, the queue is as it was (no flow "order-2", not even
      // the placeholder row a new flow's enqueue locks), and the flow's next event takes seq 2.
      expect(yield* sql`SELECT id FROM orders ORDER BY id`).toEqual([{ id: "order-1" }])
      expect(yield* sql`SELECT flow_id FROM relay_flow ORDER BY flow_id`).toEqual([{ flow_id: "order-1" }])
      const snapshot = yield* queue.snapshot
      expect(snapshot.events.map((e) => [e.eventId, e.flowId, e.seq, e.body])).toEqual([["order-1:created", "order-1", 1, { delta: 3 }]])
      expect(yield* queue.enqueue({ eventId: "order-1:paid", flowId: "order-1", body: {} })).toEqual({ _tag: "Enqueued", seq: 2 })
    }))

  it.scopedLive("two application transactions on different flows both enqueue before either commits", () =>
    Effect.gen(function*() {
      const { queue, sql } = yield* app(url)
      // Flow A already has an event; flow B is new (its enqueue inserts the flow's row).
      yield* queue.enqueue({ eventId: "A1", flowId: "A", body: {} })
      const a = yield* openOrder(sql, queue, "order-a", "A")
      const b = yield* openOrder(sql, queue, "order-b", "B")
      // Neither transaction commits before both enqueues have answered: if one enqueue waited
      // for the other transaction, this would time out.
      const answers = yield* Effect.all([Deferred.await(a.enqueued), Deferred.await(b.enqueued)], { concurrency: 2 }).pipe(
        Effect.timeout("10 seconds")
      )
      expect(answers).toEqual([{ _tag: "Enqueued", seq: 2 }, { _tag: "Enqueued", seq: 1 }])
      expect(Option.isNone(yield* Fiber.poll(a.fiber)) && Option.isNone(yield* Fiber.poll(b.fiber))).toBe(true)
      // Still open: another connection sees neither order nor event.
      expect(yield* sql`SELECT id FROM orders`).toEqual([])
      expect((yield* queue.snapshot).events.map((e) => e.eventId)).toEqual(["A1"])
      yield* Deferred.succeed(a.finish, "commit")
      yield* Deferred.succeed(b.finish, "commit")
      expect(yield* Fiber.join(a.fiber)).toEqual({ _tag: "Enqueued", seq: 2 })
      expect(yield* Fiber.join(b.fiber)).toEqual({ _tag: "Enqueued", seq: 1 })
      expect(yield* sql`SELECT id FROM orders ORDER BY id`).toEqual([{ id: "order-a" }, { id: "order-b" }])
      expect((yield* queue.snapshot).events.map((e) => [e.eventId, e.flowId, e.seq])).toEqual([
        ["A1", "A", 1],
        ["order-a:created", "A", 2],
        ["order-b:created", "B", 1]
      ])
    }))

  /**
   * Two application transactions on one flow: the second's enqueue waits (the server reports it
   * blocked by the first's backend) until the first ends; then it takes the next seq if the first
   * committed, or the first's seq if it rolled back. Run on a new flow and on one with an event.
   */
  const sameFlow = (finish: "commit" | "rollback") =>
    Effect.gen(function*() {
      const { queue, sql } = yield* app(url)
      yield* queue.enqueue({ eventId: "old1", flowId: "old", body: {} })
      for (const [flowId, before] of [["new", 0], ["old", 1]] as const) {
        const first = yield* openOrder(sql, queue, `${flowId}-order-1`, flowId)
        expect(yield* Deferred.await(first.enqueued).pipe(Effect.timeout("10 seconds"))).toEqual({ _tag: "Enqueued", seq: before + 1 })
        const holder = yield* Deferred.await(first.started)
        const second = yield* openOrder(sql, queue, `${flowId}-order-2`, flowId)
        const waiting = yield* Deferred.await(second.started).pipe(Effect.timeout("10 seconds"))
        expect(yield* blockedBy(sql, waiting, [holder])).toBe(true)
        expect(yield* Deferred.isDone(second.enqueued)).toBe(false)
        yield* Deferred.succeed(first.finish, finish)
        expect(yield* Fiber.await(first.fiber)).toEqual(
          finish === "commit" ? Exit.succeed({ _tag: "Enqueued", seq: before + 1 }) : Exit.fail("rolled back")
        )
        const seq = finish === "commit" ? before + 2 : before + 1
        expect(yield* Deferred.await(second.enqueued).pipe(Effect.timeout("10 seconds"))).toEqual({ _tag: "Enqueued", seq })
        yield* Deferred.succeed(second.finish, "commit")
        expect(yield* Fiber.join(second.fiber)).toEqual({ _tag: "Enqueued", seq })
      }
      const orders = (yield* sql<{ readonly id: string }>`SELECT id FROM orders ORDER BY id`).map((r) => r.id)
      const events = (yield* queue.snapshot).events.map((e) => [e.eventId, e.flowId, e.seq]).sort((x, y) => (String(x[0]) < String(y[0]) ? -1 : 1))
      return { orders, events }
    })

  it.scopedLive("two application transactions on the same flow: the second enqueue waits for the first's commit and takes the next seq", () =>
    Effect.gen(function*() {
      const { events, orders } = yield* sameFlow("commit")
      expect(orders).toEqual(["new-order-1", "new-order-2", "old-order-1", "old-order-2"])
      expect(events).toEqual([
        ["new-order-1:created", "new", 1],
        ["new-order-2:created", "new", 2],
        ["old-order-1:created", "old", 2],
        ["old-order-2:created", "old", 3],
        ["old1", "old", 1]
      ])
    }))

  it.scopedLive("two application transactions on the same flow: when the first rolls back, the waiting second takes its seq (no gap)", () =>
    Effect.gen(function*() {
      const { events, orders } = yield* sameFlow("rollback")
      expect(orders).toEqual(["new-order-2", "old-order-2"])
      expect(events).toEqual([
        ["new-order-2:created", "new", 1],
        ["old-order-2:created", "old", 2],
        ["old1", "old", 1]
      ])
    }))

  it.scopedLive("two application transactions that reach one drained flow at the same moment both enqueue, at the next two seqs", () =>
    Effect.gen(function*() {
      // Three transactions open at once, and a connection to watch them.
      const { queue, sql } = yield* app(url, undefined, 5)
      // F drains: its next event admits it again (a new turn, a ticket drawn by that enqueue).
      yield* queue.enqueue({ eventId: "F1", flowId: "F", body: {} })
      const claimed = yield* queue.claim
      if (claimed._tag !== "Claimed") return expect.unreachable()
      expect(yield* queue.settle(claimed.token, { _tag: "Accepted" })).toEqual({ _tag: "Acked" })
      // A third transaction holds F's row, so that both enqueues below have started before
      // either can lock the flow — what two orders of one customer placed at once look like.
      const holding = yield* Deferred.make<number>()
      const release = yield* Deferred.make<void>()
      const holder = yield* Effect.forkScoped(sql.withTransaction(Effect.gen(function*() {
        const [backend] = yield* sql<{ readonly pid: number }>`SELECT pg_backend_pid() AS pid`
        yield* sql`SELECT flow_id FROM relay_flow WHERE flow_id = 'F' FOR UPDATE`
        yield* Deferred.succeed(holding, backend!.pid)
        yield* Deferred.await(release)
      })))
      const holderPid = yield* Deferred.await(holding)
      const a = yield* openOrder(sql, queue, "order-a", "F")
      const b = yield* openOrder(sql, queue, "order-b", "F")
      // Both wait for F's row: one behind the holder, the other behind the holder or the first waiter.
      const [aPid, bPid] = [yield* Deferred.await(a.started), yield* Deferred.await(b.started)]
      expect(yield* blockedBy(sql, aPid, [holderPid, bPid])).toBe(true)
      expect(yield* blockedBy(sql, bPid, [holderPid, aPid])).toBe(true)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      yield* Deferred.succeed(a.finish, "commit")
      yield* Deferred.succeed(b.finish, "commit")
      const outcomes = [yield* Fiber.await(a.fiber), yield* Fiber.await(b.fiber)].map((exit) =>
        Exit.isSuccess(exit) ? exit.value : Cause.pretty(exit.cause).split("\n")[0]
      )
      // One of them locks F first and takes seq 2; the other waits for its commit and takes seq 3.
      expect(outcomes).toEqual(expect.arrayContaining([{ _tag: "Enqueued", seq: 2 }, { _tag: "Enqueued", seq: 3 }]))
      expect(yield* sql`SELECT id FROM orders ORDER BY id`).toEqual([{ id: "order-a" }, { id: "order-b" }])
      expect((yield* queue.snapshot).events.map((e) => e.seq)).toEqual([1, 2, 3])
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
