/**
 * Retention through the contract suite (every backend, default retention: acked events 7 days,
 * dedup records 30 days): pruning interleaved with the protocol changes no claim, and a prune
 * whose transaction fails changes nothing.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, TestClock } from "effect"
import { backends, describeSkipped } from "../support/backends.js"
import type { Backend } from "../support/backends.js"

const day = Duration.toMillis(Duration.days(1))

const suite = (backend: Backend) => {
  it.scoped("pruning between steps changes no claim: the same order as a store never pruned", () =>
    Effect.gen(function*() {
      const pruned = yield* backend.world()
      const plain = yield* backend.world()
      const events = ["A", "B", "C"].flatMap((flow) => [1, 2, 3].map((i) => ({ eventId: `${flow}${i}`, flowId: flow, body: { delta: i } })))
      const order = { pruned: [] as Array<string>, plain: [] as Array<string> }
      for (const w of [pruned, plain]) yield* w.queue.enqueueBatch(events)
      for (let step = 0; step < 9; step++) {
        yield* TestClock.setTime(step * 3 * day)
        const a = yield* pruned.step
        const b = yield* plain.step
        if (a !== null) order.pruned.push(a.eventId)
        if (b !== null) order.plain.push(b.eventId)
        yield* pruned.queue.prune()
      }
      expect(order.pruned).toEqual(["A1", "B1", "C1", "A2", "B2", "C2", "A3", "B3", "C3"])
      expect(order.pruned).toEqual(order.plain)
      const [left, right] = [yield* pruned.queue.snapshot, yield* plain.queue.snapshot]
      expect(left.flows).toEqual(right.flows)
      // Acked at 0, 3, …, 24 days: those acked 7 days or more before day 24 are gone.
      expect(left.events.map((e) => e.eventId)).toEqual(["A3", "B3", "C3"])
      expect(yield* pruned.totals).toEqual(yield* plain.totals)
    }))

  it.scoped("a prune whose transaction fails changes nothing", () =>
    Effect.gen(function*() {
      const w = yield* backend.world()
      yield* w.queue.enqueueBatch([{ eventId: "A1", flowId: "A", body: { delta: 1 } }, { eventId: "A2", flowId: "A", body: { delta: 2 } }])
      yield* w.step
      const before = yield* w.queue.snapshot
      yield* w.rejectInserts("queue", "relay_pruned")
      yield* TestClock.setTime(8 * day)
      const error = yield* Effect.flip(w.queue.prune())
      expect(error).toMatchObject({ _tag: "SqlError" })
      expect(yield* w.queue.snapshot).toEqual(before)
    }))
}

for (const backend of backends) describe(backend.name, () => suite(backend))
describeSkipped(suite)
