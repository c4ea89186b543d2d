/**
 * What `Relay.run` tells an operator in its logs: each quarantine as one Warn line naming the
 * event, its flow, its group and the reason; a flow's retries as one Warn line per interval with
 * their count and the last reason, however many deliveries failed. Time is TestClock's.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Ref, TestClock } from "effect"
import type { PolicyInput } from "../../src/domain/Policy.js"
import type { DeliveryReply } from "../../src/domain/Outcomes.js"
import type { DeliveryInput } from "../../src/domain/Records.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { Relay } from "../../src/services/Relay.js"
import type { RunOptions } from "../../src/services/Relay.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import { DeliveryFailed, Transport } from "../../src/services/Transport.js"
import { captureLogs } from "../support/logs.js"

const policy: PolicyInput = { leaseTicks: "1 minute", backoffBase: "1 second", backoffCap: "1 second", retryBudget: 100 }
const quiet: RunOptions = { pollInterval: "1 hour", deliveryTimeout: "10 seconds", metricsInterval: null, pruneInterval: null, policyInterval: null }

/** A queue in memory and a relay whose transport answers each delivery with `answer`. */
const relayOver = (answer: (delivery: DeliveryInput) => Effect.Effect<DeliveryReply, DeliveryFailed>) =>
  Layer.build(
    Relay.layer.pipe(
      Layer.provideMerge(Layer.succeed(Transport, { deliver: answer })),
      Layer.provideMerge(SqliteRelayQueue.layer({ filename: ":memory:", policy }))
    )
  )

/** Lets the relay's fibers run until `done` holds (no clock time passes). */
const until = (done: Effect.Effect<boolean, unknown>) =>
  Effect.gen(function*() {
    for (let i = 0; i < 2000; i++) {
      if (yield* done) return
      yield* Effect.yieldNow()
    }
    return yield* Effect.dieMessage("the relay did not get there")
  })

describe("Relay.run tells", () => {
  it.scoped("a quarantine as exactly one Warn line naming the event, its flow, its group and the reason", () =>
    Effect.gen(function*() {
      const context = yield* relayOver((delivery) =>
        Effect.succeed<DeliveryReply>(delivery.eventId === "A1" ? { _tag: "Rejected", code: "bad_payload" } : { _tag: "Accepted" })
      )
      const { layer, logs } = captureLogs()
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: {}, group: "tenant-1" })
        yield* queue.enqueue({ eventId: "B1", flowId: "B", body: {} })
        const running = yield* Effect.fork((yield* Relay).run(quiet).pipe(Effect.provide(layer)))
        yield* until(Effect.map(queue.stats, (s) => s.byState.quarantined === 1 && s.byState.acked === 1))
        yield* Fiber.interrupt(running)
      }).pipe(Effect.provide(context))
      const warnings = logs.filter((log) => log.level === "WARN")
      expect(warnings).toHaveLength(1)
      expect(warnings[0]!.annotations).toMatchObject({ eventId: "A1", flowId: "A", group: "tenant-1", reason: "bad_payload" })
      for (const part of ["A1", "flow A", "tenant-1", "bad_payload"]) expect(warnings[0]!.message).toContain(part)
    }))

  it.scoped("a flow's retries within the interval as one Warn line with their count and the last reason", () =>
    Effect.gen(function*() {
      // A's first five deliveries get no reply (the receiver is down), the sixth is accepted.
      const deliveries = yield* Ref.make(0)
      const context = yield* relayOver((delivery) =>
        Effect.flatMap(Ref.updateAndGet(deliveries, (n) => n + 1), (n) =>
          n <= 5
            ? Effect.fail(new DeliveryFailed({ eventId: delivery.eventId, message: `connection refused (${n})`, cause: null }))
            : Effect.succeed<DeliveryReply>({ _tag: "Accepted" }))
      )
      const { layer, logs } = captureLogs()
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: {} })
        const running = yield* Effect.fork((yield* Relay).run({ ...quiet, retryLogInterval: "1 minute" }).pipe(Effect.provide(layer)))
        // Each retry is due a second later: five of them take five seconds of the minute.
        for (let second = 0; second < 10; second++) {
          if ((yield* queue.stats).byState.acked === 1) break
          yield* until(Effect.map(Ref.get(deliveries), (n) => n > second))
          yield* TestClock.adjust("1 second")
        }
        yield* until(Effect.map(queue.stats, (s) => s.byState.acked === 1))
        expect(yield* Ref.get(deliveries)).toBe(6)
        const retryWarnings = () => logs.filter((log) => log.level === "WARN")
        // Nothing told while the interval runs.
        expect(retryWarnings()).toEqual([])
        yield* TestClock.adjust("1 minute")
        yield* until(Effect.sync(() => retryWarnings().length > 0))
        expect(retryWarnings()).toHaveLength(1)
        expect(retryWarnings()[0]!.annotations).toMatchObject({ flowId: "A", retries: 5, reason: "transport: connection refused (5)" })
        expect(retryWarnings()[0]!.message).toContain("5 retries")
        // The next interval has nothing to tell, and neither has shutdown.
        yield* TestClock.adjust("1 minute")
        yield* Fiber.interrupt(running)
        expect(retryWarnings()).toHaveLength(1)
      }).pipe(Effect.provide(context))
    }))

  it.scoped("the retries not yet told when the relay stops, in one line per flow", () =>
    Effect.gen(function*() {
      const context = yield* relayOver((delivery) => Effect.succeed<DeliveryReply>({ _tag: "Retry", reason: `busy ${delivery.flowId}` }))
      const { layer, logs } = captureLogs()
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: {} })
        yield* queue.enqueue({ eventId: "B1", flowId: "B", body: {} })
        const running = yield* Effect.fork((yield* Relay).run({ ...quiet, retryLogInterval: "1 hour" }).pipe(Effect.provide(layer)))
        yield* until(Effect.map(queue.events({ state: "ready" }), (events) => events.length === 2 && events.every((e) => e.attempts === 1)))
        yield* Fiber.interrupt(running)
      }).pipe(Effect.provide(context))
      const warnings = logs.filter((log) => log.level === "WARN").map((log) => log.annotations)
      expect(warnings).toEqual(expect.arrayContaining([
        expect.objectContaining({ flowId: "A", retries: 1, reason: "busy A" }),
        expect.objectContaining({ flowId: "B", retries: 1, reason: "busy B" })
      ]))
      expect(warnings).toHaveLength(2)
    }))
})
