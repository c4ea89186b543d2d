/**
 * The in-memory queue's transactions: what the SQL backends get from the database (a failed or
 * interrupted write changes nothing, writes take turns, a read sees one moment) and the public
 * `MemoryRelayQueue` layer. The contract suite (test/services) and the model-based test
 * (test/model) run the whole protocol on it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Option } from "effect"
import type { NewEvent } from "../../src/domain/Operations.js"
import { seedPolicy } from "../../src/domain/Policy.js"
import type { FlowRecord } from "../../src/domain/Records.js"
import * as MemoryRelayQueue from "../../src/layers/MemoryRelayQueue.js"
import * as MemoryBackend from "../../src/layers/internal/MemoryRelayQueue.js"
import { eid, fid, flowRecord, readyEvent } from "../domain/fixtures.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"

const flow = (id: string): FlowRecord => flowRecord(id, 0)

const event = (id: string, flowId: string): NewEvent => ({
  record: readyEvent({ eventId: eid(id), flowId: fid(flowId) }),
  bodyText: `{"delta":1}`
})

describe("memory backend transactions", () => {
  it.effect("a write that fails after some of its writes changes nothing", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.backend
      yield* backend.write((tx) => Effect.zipRight(tx.putFlows([flow("A")]), tx.insertEvents([event("A1", "A")])))
      const before = yield* backend.read((tx) => tx.dump)
      const exit = yield* Effect.exit(backend.write((tx) =>
        Effect.gen(function*() {
          yield* tx.putFlows([flow("B")])
          yield* tx.insertEvents([event("B1", "B")])
          yield* tx.setClock({ tick: 9, ticket: 9 })
          expect((yield* tx.dump).events).toHaveLength(2)
          return yield* Effect.fail("refused" as const)
        })
      ))
      expect(exit).toEqual(Exit.fail("refused"))
      expect(yield* backend.read((tx) => tx.dump)).toEqual(before)
      expect(yield* backend.read((tx) => tx.clock)).toEqual({ tick: 0, ticket: 0 })
    }))

  it.effect("a duplicate event id is a SqlError, and the whole transaction is undone", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.backend
      yield* backend.write((tx) => Effect.zipRight(tx.putFlows([flow("A")]), tx.insertEvents([event("A1", "A")])))
      const before = yield* backend.read((tx) => tx.dump)
      const exit = yield* Effect.exit(backend.write((tx) => Effect.zipRight(tx.putFlows([flow("B")]), tx.insertEvents([event("A1", "B")]))))
      expect(exit).toMatchObject({ _tag: "Failure", cause: { _tag: "Fail", error: { _tag: "SqlError" } } })
      expect(yield* backend.read((tx) => tx.dump)).toEqual(before)
    }))

  it.effect("a write interrupted before its commit (at the before-commit point) changes nothing", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.backend
      const reached = yield* Deferred.make<void>()
      const fiber = yield* Effect.fork(
        backend.write((tx) => tx.setClock({ tick: 5, ticket: 1 }), Effect.zipRight(Deferred.succeed(reached, undefined), Effect.never))
      )
      yield* Deferred.await(reached)
      yield* Fiber.interrupt(fiber)
      expect(yield* backend.read((tx) => tx.clock)).toEqual({ tick: 0, ticket: 0 })
      // The permit was given back: the next write runs.
      yield* backend.write((tx) => tx.setClock({ tick: 1, ticket: 0 }))
      expect(yield* backend.read((tx) => tx.clock)).toEqual({ tick: 1, ticket: 0 })
    }))

  it.effect("writes take turns: a second write waits for the first to commit and sees what it wrote", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.backend
      const reached = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const bump = backend.write((tx) => Effect.flatMap(tx.clock, (c) => tx.setClock({ ...c, ticket: c.ticket + 1 })))
      const first = yield* Effect.fork(
        backend.write(
          (tx) => Effect.flatMap(tx.clock, (c) => tx.setClock({ ...c, ticket: c.ticket + 1 })),
          Effect.zipRight(Deferred.succeed(reached, undefined), Deferred.await(release))
        )
      )
      yield* Deferred.await(reached)
      const second = yield* Effect.fork(bump)
      yield* Effect.yieldNow()
      expect(Option.isNone(yield* Fiber.poll(second))).toBe(true)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(first)
      yield* Fiber.join(second)
      expect(yield* backend.read((tx) => tx.clock)).toEqual({ tick: 0, ticket: 2 })
    }))

  it.effect("a read sees the state of one moment, even if a write commits while it runs", () =>
    Effect.gen(function*() {
      const backend = yield* MemoryBackend.backend
      const [before, after] = yield* backend.read((tx) =>
        Effect.gen(function*() {
          const before = yield* tx.clock
          yield* backend.write((w) => w.setClock({ tick: 7, ticket: 3 }))
          return [before, yield* tx.clock] as const
        })
      )
      expect(after).toEqual(before)
      expect(yield* backend.read((tx) => tx.clock)).toEqual({ tick: 7, ticket: 3 })
    }))
})

describe("MemoryRelayQueue", () => {
  it.effect("provides RelayQueue: enqueue, claim and settle as on SQLite; each layer is a new, empty store", () =>
    Effect.gen(function*() {
      const run = Effect.gen(function*() {
        const queue = yield* RelayQueue
        expect(yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })).toEqual({ _tag: "Enqueued", seq: 1 })
        const claimed = yield* queue.claim
        if (claimed._tag !== "Claimed") return expect.fail("expected a claim")
        expect(claimed.leaseUntil).toBe(5)
        expect(yield* queue.settle(claimed.token, { _tag: "Accepted" })).toEqual({ _tag: "Acked" })
        return (yield* queue.snapshot).events.map((e) => [e.eventId, e.state])
      })
      const layer = MemoryRelayQueue.layer({ policy: seedPolicy })
      expect(yield* Effect.provide(run, layer)).toEqual([["A1", "acked"]])
      expect(yield* Effect.provide(run, layer)).toEqual([["A1", "acked"]])
    }))

  it.effect("an invalid policy is refused with InvalidInput", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(MemoryRelayQueue.make({ policy: { retryBudget: 0 } }))
      expect(exit).toMatchObject({ _tag: "Failure", cause: { error: { _tag: "InvalidInput" } } })
    }))
})
