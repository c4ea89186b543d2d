/**
 * The worker daemon prunes in the background: every `pruneInterval` the queue deletes what its
 * retention lets go, and counts it in `fair_relay_pruned_total{kind}`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Metric, Ref, TestClock } from "effect"
import * as SqliteInbox from "../../src/layers/SqliteInbox.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import * as Counter from "../../src/sample/Counter.js"
import { Inbox } from "../../src/services/Inbox.js"
import * as Metrics from "../../src/services/Metrics.js"
import { Relay } from "../../src/services/Relay.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import { Transport } from "../../src/services/Transport.js"

const layers = Effect.gen(function*() {
  const maxDelta = yield* Ref.make(1000)
  const inbox = SqliteInbox.layer({ filename: ":memory:", business: Counter.business(maxDelta) })
  const transport = Layer.effect(Transport, Effect.map(Inbox, (inbox) => ({ deliver: (delivery) => Effect.orDie(inbox.receive(delivery)) })))
  return yield* Layer.build(
    Relay.layer.pipe(
      Layer.provideMerge(transport),
      Layer.provideMerge(inbox),
      Layer.provideMerge(
        SqliteRelayQueue.layer({
          filename: ":memory:",
          policy: { leaseTicks: "1 minute", backoffBase: "1 second", backoffCap: "1 minute" },
          retention: { acked: "1 hour", dedup: "1 day" }
        })
      )
    )
  )
})

describe("Relay.run pruning", () => {
  it.scoped("acked events are pruned by the daemon once past their window, not before; flows stay", () =>
    Effect.gen(function*() {
      const context = yield* layers
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        const relay = yield* Relay
        const before = (yield* Metric.value(Metrics.prunedByKind.events)).count
        yield* queue.enqueueBatch([1, 2, 3].map((i) => ({ eventId: `A${i}`, flowId: "A", body: { delta: i } })))
        const running = yield* Effect.fork(relay.run({ pollInterval: "1 hour", deliveryTimeout: "10 seconds", metricsInterval: null, pruneInterval: "10 minutes" }))
        for (let i = 0; i < 10_000; i++) {
          if ((yield* queue.snapshot).events.every((e) => e.state === "acked")) break
          yield* Effect.yieldNow()
        }
        yield* queue.enqueue({ eventId: "B1", flowId: "B", body: { delta: 1 } })
        yield* TestClock.adjust("50 minutes")
        expect((yield* queue.snapshot).events.length).toBe(4)
        yield* TestClock.adjust("20 minutes")
        for (let i = 0; i < 1_000 && (yield* queue.snapshot).events.length > 1; i++) yield* Effect.yieldNow()
        yield* Fiber.interrupt(running)
        const after = yield* queue.snapshot
        // B1 was acked at 0 too (a worker took it at once), so it is pruned with the others.
        expect(after.events).toEqual([])
        expect(after.flows.map((f) => [f.flowId, f.seq])).toEqual([["A", 3], ["B", 1]])
        expect((yield* Metric.value(Metrics.prunedByKind.events)).count - before).toBe(4)
        expect(yield* queue.enqueue({ eventId: "A2", flowId: "A", body: { delta: 2 } })).toEqual({ _tag: "Existing", seq: 2 })
      }).pipe(Effect.provide(context))
    }))
})
