/**
 * The queue's notable changes (`changes`, `watchChanges`), on every backend: a quarantine with
 * its flow's group, and each operator action that changed something, in the order made; what
 * changes nothing (a retry, an ack, a second pause, the same policy again, a refused action) is
 * not told.
 */
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Fiber, Metric, Queue, Stream, TestClock } from "effect"
import type { NotableChange } from "../../src/domain/Notable.js"
import { UnsupportedDelta } from "../../src/sample/Counter.js"
import * as Metrics from "../../src/services/Metrics.js"
import { backends, describeSkipped } from "../support/backends.js"
import type { Backend } from "../support/backends.js"

const suite = (backend: Backend) => {
  describe("notable changes", () => {
    it.scoped("a settle that quarantines tells the event, its flow, its group and the reason, and counts it by group; a retry and an ack tell nothing", () =>
      Effect.gen(function*() {
        const w = yield* backend.world({ maxDelta: 5 })
        const told = yield* w.queue.watchChanges
        // Metrics are process-wide: a group of this backend's own.
        const group = `tenant-${backend.name}`
        const quarantines = Effect.map(Metric.value(Metric.tagged(Metrics.groupQuarantines, "group", group)), (state) => state.count)
        const before = yield* quarantines
        yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 10 }, group })
        expect(yield* w.step).toMatchObject({ eventId: "A1", outcome: { _tag: "Quarantined" } })
        yield* w.queue.enqueue({ eventId: "B1", flowId: "B", body: { delta: 1 } })
        expect(yield* w.step).toMatchObject({ eventId: "B1", outcome: { _tag: "Acked" } })
        yield* w.queue.enqueue({ eventId: "C1", flowId: "C", body: { delta: 1 } })
        const c1 = yield* w.claim
        expect(yield* w.queue.settle(c1.token, { _tag: "Retry", reason: "busy" })).toMatchObject({ _tag: "RetryScheduled" })
        expect(Chunk.toReadonlyArray(yield* Queue.takeAll(told))).toEqual([
          { _tag: "Quarantined", eventId: "A1", flowId: "A", group, reason: UnsupportedDelta, generation: 1 }
        ])
        expect((yield* quarantines) - before).toBe(1)
        // A flow of no group, quarantined in a batch with another settle and a claim.
        yield* TestClock.adjust("1 hour")
        const again = yield* w.claim
        yield* w.queue.settleAndClaim([{ token: again.token, reply: { _tag: "Rejected", code: "gone" } }], 1)
        expect(Chunk.toReadonlyArray(yield* Queue.takeAll(told))).toEqual([
          { _tag: "Quarantined", eventId: "C1", flowId: "C", group: null, reason: "gone", generation: 2 }
        ])
      }))

    it.scoped("every operator action that changed something, in order, with its reason and actor", () =>
      Effect.gen(function*() {
        const w = yield* backend.world({ maxDelta: 5 })
        yield* w.queue.enqueueBatch([
          { eventId: "A1", flowId: "A", body: { delta: 10 }, group: "g" },
          { eventId: "A2", flowId: "A", body: { delta: 1 } },
          { eventId: "B1", flowId: "B", body: { delta: 10 }, group: "g" }
        ])
        yield* w.step
        yield* w.step
        const told = yield* w.queue.watchChanges
        yield* w.queue.redrive({ eventId: "A1", expectedGeneration: 1, reason: "fixed", actor: "ana" })
        expect(yield* w.step).toMatchObject({ eventId: "A1", outcome: { _tag: "Quarantined" } })
        yield* w.queue.discard({ eventId: "A1", expectedGeneration: 3, reason: "poison", actor: "ana" })
        yield* w.queue.pause({ flowId: "A", reason: "receiver down" })
        yield* w.queue.pause({ flowId: "A", reason: "still down" })
        yield* w.queue.resume({ flowId: "A", reason: "back", actor: "bo" })
        yield* w.queue.pause({ group: "g", reason: "tenant down" })
        yield* w.queue.resume({ group: "g", reason: "tenant back" })
        const refused = yield* Effect.flip(w.queue.redrive({ eventId: "B1", expectedGeneration: 7, reason: "stale" }))
        expect(refused._tag).toBe("GenerationMismatch")
        yield* w.queue.redriveAll({ filter: { group: "g" }, reason: "bulk", actor: "cy" })
        const policy = yield* w.queue.setPolicy({ policy: { retryBudget: 7 }, reason: "outage", actor: "ops" })
        yield* w.queue.setPolicy({ policy: { retryBudget: 7 }, reason: "again" })
        const changes: ReadonlyArray<NotableChange> = Chunk.toReadonlyArray(yield* Queue.takeAll(told))
        expect(changes).toEqual([
          { _tag: "Redriven", eventId: "A1", flowId: "A", generation: 2, reason: "fixed", actor: "ana" },
          { _tag: "Quarantined", eventId: "A1", flowId: "A", group: "g", reason: UnsupportedDelta, generation: 3 },
          { _tag: "Discarded", eventId: "A1", flowId: "A", generation: 4, reason: "poison", actor: "ana" },
          { _tag: "Paused", target: { kind: "flow", id: "A" }, reason: "receiver down", actor: null },
          { _tag: "Resumed", target: { kind: "flow", id: "A" }, reason: "back", actor: "bo" },
          { _tag: "Paused", target: { kind: "group", id: "g" }, reason: "tenant down", actor: null },
          { _tag: "Resumed", target: { kind: "group", id: "g" }, reason: "tenant back", actor: null },
          { _tag: "Redriven", eventId: "B1", flowId: "B", generation: 2, reason: "bulk", actor: "cy" },
          {
            _tag: "PolicyChanged",
            changed: ["retryBudget"],
            settings: expect.objectContaining({ retryBudget: 7 }),
            version: policy.version,
            reason: "outage",
            actor: "ops"
          }
        ])
        // A dry run changes nothing.
        yield* w.queue.redriveAll({ filter: { all: true }, reason: "look", dryRun: true })
        expect(Chunk.toReadonlyArray(yield* Queue.takeAll(told))).toEqual([])
      }))

    it.scoped("the changes stream gives a subscriber the changes made while it runs", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        const reading = yield* Effect.fork(Stream.runCollect(Stream.take(w.queue.changes, 2)))
        // The stream subscribes when its fiber first runs: let it.
        for (let i = 0; i < 10; i++) yield* Effect.yieldNow()
        yield* w.queue.pause({ flowId: "A", reason: "hold" })
        yield* w.queue.resume({ flowId: "A", reason: "go" })
        const got = Chunk.toReadonlyArray(yield* Fiber.join(reading))
        expect(got.map((change) => change._tag)).toEqual(["Paused", "Resumed"])
      }))
  })
}

for (const backend of backends) describe(backend.name, () => suite(backend))
describeSkipped(suite)
