/**
 * Connection loss in the middle of a write transaction (PostgreSQL): the backend running the
 * transaction is terminated with `pg_terminate_backend` from a separate admin connection while
 * the transaction holds the store's advisory lock and has done its writes but not committed.
 *
 * Each case asserts: the operation fails with a typed `SqlError` (an error, not a defect, not a
 * success); the killed backend is gone; the snapshot equals the one taken before (nothing of the
 * transaction is visible); the store is usable afterwards (the same operation succeeds, with the
 * outcome it would have had if the killed one had never run).
 *
 * A fourth case shows the configuration docs/postgres.md recommends against a worker that stalls
 * inside a transaction (holding the store's lock): `idle_in_transaction_session_timeout` in the
 * URL's options makes the server end that session, and the next writer proceeds.
 *
 * The transaction's own backend is found by the advisory lock it holds (`lockHolders`): exactly
 * one backend holds the store's lock, the one running our transaction, with application name
 * "fair-relay". That stays precise when other tests use the same database concurrently.
 */
import { seedPolicy } from "../../src/domain/Policy.js"
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import * as PgClient from "@effect/sql-pg/PgClient"
import { it } from "@effect/vitest"
import { Cause, Context, Deferred, Duration, Effect, Exit, Fiber, Option, Redacted, Schedule } from "effect"
import { expect } from "vitest"
import type { EnqueueInput, RelayQueueService } from "../../src/index.js"
import { Faults, PgRelayQueue, TickClock } from "../../src/index.js"
import { freshSchema } from "../support/backends.js"
import { describePg, lockHolders } from "./support.js"

type Admin = SqlClient.SqlClient

/** Runs `effect` outside any ambient transaction (a fault hook runs inside the store's). */
const outsideTransaction = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.mapInputContext(effect, (context: Context.Context<R>) => Context.omit(SqlClient.TransactionConnection)(context) as Context.Context<R>)

/** The one backend holding the queue store's lock, once it is in the wanted condition. */
const awaitHolder = (admin: Admin, schema: string, ready: (row: { state: string | null; wait_event_type: string | null }) => boolean) =>
  lockHolders(admin, schema, "relay_queue").pipe(
    Effect.flatMap((rows) =>
      rows.length === 1 && ready(rows[0]!) ? Effect.succeed(rows[0]!) : Effect.fail(`lock holders: ${JSON.stringify(rows)}`)),
    Effect.retry(Schedule.spaced(Duration.millis(10)).pipe(Schedule.upTo(Duration.seconds(10)))),
    Effect.orDie
  )

/** Terminates a backend and waits (up to 5 s) until it has exited. */
const terminate = (admin: Admin, pid: number) =>
  Effect.flatMap(admin<{ ok: boolean }>`SELECT pg_terminate_backend(${pid}, 5000) AS ok`, ([row]) =>
    row?.ok === true ? Effect.void : Effect.dieMessage(`pg_terminate_backend(${pid}) did not report success`))

const isAlive = (admin: Admin, pid: number) =>
  Effect.map(admin<{ n: unknown }>`SELECT count(*) AS n FROM pg_stat_activity WHERE pid = ${pid}`, ([row]) => Number(row?.n) > 0)

/** Fails the test unless `exit` is a failure whose only cause is a `SqlError`. */
const expectSqlError = (exit: Exit.Exit<unknown, unknown>): SqlError => {
  if (Exit.isSuccess(exit)) throw new Error(`expected a SqlError, got success ${JSON.stringify(exit.value)}`)
  expect(Cause.isDie(exit.cause), Cause.pretty(exit.cause)).toBe(false)
  expect(Cause.isInterrupted(exit.cause), Cause.pretty(exit.cause)).toBe(false)
  const error = Option.getOrUndefined(Cause.failureOption(exit.cause))
  expect(error, Cause.pretty(exit.cause)).toBeInstanceOf(SqlError)
  return error as SqlError
}

const events: ReadonlyArray<EnqueueInput> = [
  { eventId: "A1", flowId: "A", body: { delta: 1 } },
  { eventId: "A2", flowId: "A", body: { delta: 2 } },
  { eventId: "B1", flowId: "B", body: { delta: 3 } }
]

describePg("PostgreSQL: the backend killed mid-transaction leaves no partial state", (url) => {
  /** A fresh queue schema with `events` enqueued at tick 0. */
  const open = (initial: ReadonlyArray<EnqueueInput>) =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const queue: RelayQueueService = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 2, policy: seedPolicy })
      for (const event of initial) yield* queue.enqueue(event).pipe(TickClock.at(0))
      return { schema, queue }
    })

  it.scopedLive("claim: killed at claim:before-commit → SqlError, snapshot unchanged, the next claim works", () =>
    Effect.gen(function*() {
      const { queue, schema } = yield* open(events)
      const before = yield* queue.snapshot
      const seen: Array<{ pid: number; state: string | null; application_name: string }> = []
      // The hook runs inside the claim's transaction, after its writes, before COMMIT: the
      // transaction's backend is idle in transaction, holding the lock. Kill it from the admin
      // connection (outside the transaction), then let the claim go on to its COMMIT.
      const killer: Context.Tag.Service<Faults.Faults> = {
        hit: (point) =>
          point !== "claim:before-commit" ? Effect.void : outsideTransaction(
            Effect.gen(function*() {
              const holder = yield* awaitHolder(schema.admin, schema.name, (row) => row.state === "idle in transaction")
              seen.push(holder)
              yield* Effect.orDie(terminate(schema.admin, holder.pid))
            })
          )
      }
      const exit = yield* queue.claim.pipe(TickClock.at(1), Effect.provideService(Faults.Faults, killer), Effect.exit)
      const error = expectSqlError(exit)
      expect(seen).toHaveLength(1)
      expect(seen[0]).toMatchObject({ state: "idle in transaction", application_name: "fair-relay" })
      expect(yield* isAlive(schema.admin, seen[0]!.pid)).toBe(false)
      console.log(`claim killed mid-transaction: ${error.message}; cause: ${String((error.cause as Error | undefined)?.message)}`)

      // Nothing of the claim is visible: ticket, tick, state, generation, attempts, served.
      expect(yield* queue.snapshot).toEqual(before)
      // No lock left behind.
      expect(yield* lockHolders(schema.admin, schema.name, "relay_queue")).toEqual([])

      // The store is usable: the claim the killed one would have made, generation 1, ticket 1.
      const next = yield* queue.claim.pipe(TickClock.at(1))
      expect(next).toMatchObject({ _tag: "Claimed", token: { eventId: "A1", generation: 1 }, leaseUntil: 6 })
      const after = yield* queue.snapshot
      expect(after.clock).toEqual({ tick: 1, ticket: 1 })
      expect(after.events.find((e) => e.eventId === "A1")).toMatchObject({ state: "inflight", attempts: 1, generation: 1 })
      expect(after.flows.map((f) => [f.flowId, f.served])).toEqual([["A", 1], ["B", 0]])
    }))

  it.scopedLive("settle: killed at settle:before-commit (hook blocked, test kills) → SqlError, unchanged, settle again → Acked", () =>
    Effect.gen(function*() {
      const { queue, schema } = yield* open(events)
      const claimed = yield* queue.claim.pipe(TickClock.at(0))
      if (claimed._tag !== "Claimed") return yield* Effect.dieMessage("expected a claim")
      const before = yield* queue.snapshot

      // The hook parks the settle inside its transaction until the test has killed the backend.
      const reached = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const parking: Context.Tag.Service<Faults.Faults> = {
        hit: (point) => point === "settle:before-commit" ? Effect.zipRight(Deferred.succeed(reached, undefined), Deferred.await(release)) : Effect.void
      }
      const settling = yield* queue.settle(claimed.token, { _tag: "Accepted" }).pipe(
        TickClock.at(1),
        Effect.provideService(Faults.Faults, parking),
        Effect.exit,
        Effect.fork
      )
      yield* Deferred.await(reached)
      const holder = yield* awaitHolder(schema.admin, schema.name, (row) => row.state === "idle in transaction")
      expect(holder.application_name).toBe("fair-relay")
      yield* terminate(schema.admin, holder.pid)
      yield* Deferred.succeed(release, undefined)
      const error = expectSqlError(yield* Fiber.join(settling))
      console.log(`settle killed mid-transaction: ${error.message}; cause: ${String((error.cause as Error | undefined)?.message)}`)

      // A1 is still inflight under generation 1, ticket and tick unchanged, flow head unchanged.
      expect(yield* queue.snapshot).toEqual(before)
      expect(yield* lockHolders(schema.admin, schema.name, "relay_queue")).toEqual([])

      // The store is usable, and the same token still counts (the lease runs to 5).
      expect(yield* queue.settle(claimed.token, { _tag: "Accepted" }).pipe(TickClock.at(1))).toEqual({ _tag: "Acked" })
      const after = yield* queue.snapshot
      expect(after.events.find((e) => e.eventId === "A1")).toMatchObject({ state: "acked", generation: 1, attempts: 1 })
      expect(after.clock).toEqual({ tick: 1, ticket: 1 })
    }))

  it.scopedLive("a stalled worker: idle_in_transaction_session_timeout (set in the URL) ends its transaction and frees the lock", () =>
    Effect.gen(function*() {
      const { queue, schema } = yield* open(events)
      // A worker whose sessions end any transaction left idle for 300 ms.
      const stalledUrl = new URL(schema.url)
      stalledUrl.searchParams.set("options", `-c search_path=${schema.name} -c idle_in_transaction_session_timeout=300`)
      const stalled = yield* PgRelayQueue.make({ url: stalledUrl.toString(), maxConnections: 1, policy: seedPolicy })
      const reached = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const hang: Context.Tag.Service<Faults.Faults> = {
        hit: (point) => point === "claim:before-commit" ? Effect.zipRight(Deferred.succeed(reached, undefined), Deferred.await(release)) : Effect.void
      }
      const stalling = yield* stalled.claim.pipe(TickClock.at(1), Effect.provideService(Faults.Faults, hang), Effect.exit, Effect.fork)
      yield* Deferred.await(reached)
      const holder = yield* awaitHolder(schema.admin, schema.name, (row) => row.state === "idle in transaction")

      // Another worker's claim waits for the lock until the server ends the stalled session, then
      // makes the claim the stalled one had made (rolled back): A1, generation 1, ticket 1.
      const started = Date.now()
      const next = yield* queue.claim.pipe(TickClock.at(1))
      const waited = Date.now() - started
      expect(next).toMatchObject({ _tag: "Claimed", token: { eventId: "A1", generation: 1 } })
      expect(waited).toBeGreaterThanOrEqual(100)
      expect(yield* isAlive(schema.admin, holder.pid)).toBe(false)
      console.log(`stalled worker: the next claim waited ${waited} ms for the lock`)

      yield* Deferred.succeed(release, undefined)
      expectSqlError(yield* Fiber.join(stalling))
      const after = yield* queue.snapshot
      expect(after.clock).toEqual({ tick: 1, ticket: 1 })
      expect(after.events.find((e) => e.eventId === "A1")).toMatchObject({ state: "inflight", attempts: 1, generation: 1 })
    }))

  it.scopedLive("enqueue: killed after the flow's seq was bumped, before the event row → SqlError, flow seq unchanged, enqueue again works", () =>
    Effect.gen(function*() {
      const { queue, schema } = yield* open(events.slice(0, 1))
      const before = yield* queue.snapshot
      expect(before.flows.map((f) => [f.flowId, f.seq])).toEqual([["A", 1]])

      // A gate: a trigger on relay_event makes the INSERT wait for an advisory lock that a
      // separate connection holds. enqueue(A2) updates relay_flow.seq to 2 first, then blocks in
      // the INSERT, inside its transaction and holding the store's lock.
      const gateKey = `${schema.name}/gate`
      yield* schema.admin.unsafe(`CREATE FUNCTION "${schema.name}".gate() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN PERFORM pg_advisory_xact_lock(hashtext('${gateKey}')); RETURN NEW; END $$`)
      yield* schema.admin.unsafe(`CREATE TRIGGER gate BEFORE INSERT ON "${schema.name}".relay_event
        FOR EACH ROW EXECUTE FUNCTION "${schema.name}".gate()`)
      const gate = yield* PgClient.make({ url: Redacted.make(url), maxConnections: 1 }).pipe(Effect.provide(Reactivity.layer))
      yield* gate`SELECT pg_advisory_lock(hashtext(${gateKey}))`

      const enqueuing = yield* queue.enqueue({ eventId: "A2", flowId: "A", body: { delta: 2 } }).pipe(
        TickClock.at(3),
        Effect.exit,
        Effect.fork
      )
      const holder = yield* awaitHolder(schema.admin, schema.name, (row) => row.state === "active" && row.wait_event_type === "Lock")
      expect(holder.application_name).toBe("fair-relay")
      yield* terminate(schema.admin, holder.pid)
      yield* gate`SELECT pg_advisory_unlock(hashtext(${gateKey}))`
      const error = expectSqlError(yield* Fiber.join(enqueuing))
      console.log(`enqueue killed mid-transaction: ${error.message}; cause: ${String((error.cause as Error | undefined)?.message)}`)

      // Flow A's seq is still 1, no A2 row, the clock still at tick 0.
      expect(yield* queue.snapshot).toEqual(before)
      expect(yield* lockHolders(schema.admin, schema.name, "relay_queue")).toEqual([])

      // The store is usable: the same enqueue gets seq 2, as if the killed one had never run.
      yield* schema.admin.unsafe(`DROP TRIGGER gate ON "${schema.name}".relay_event`)
      expect(yield* queue.enqueue({ eventId: "A2", flowId: "A", body: { delta: 2 } }).pipe(TickClock.at(3)))
        .toEqual({ _tag: "Enqueued", seq: 2 })
      const after = yield* queue.snapshot
      expect(after.flows.map((f) => [f.flowId, f.seq])).toEqual([["A", 2]])
      expect(after.events.map((e) => [e.eventId, e.seq, e.state])).toEqual([["A1", 1, "ready"], ["A2", 2, "ready"]])
      expect(after.clock.tick).toBe(3)
    }))
})
