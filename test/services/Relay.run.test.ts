/**
 * The worker daemon: N workers, idle sleeps that wake on local work and on the next eligible
 * time, delivery timeouts and transport failures settled as Retry, graceful shutdown.
 * Time is TestClock's: nothing here waits on the wall clock.
 */
import { describe, expect, it } from "@effect/vitest"
import { ConfigProvider, Context, Deferred, Duration, Effect, Fiber, Layer, Logger, LogLevel, Metric, Queue, Random, Ref, TestClock } from "effect"
import * as SqliteInbox from "../../src/layers/SqliteInbox.js"
import { seedPolicy } from "../../src/domain/Policy.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import * as Counter from "../../src/sample/Counter.js"
import { Inbox } from "../../src/services/Inbox.js"
import * as Metrics from "../../src/services/Metrics.js"
import { Relay, runConfig } from "../../src/services/Relay.js"
import type { RunOptions } from "../../src/services/Relay.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import type { PolicyInput } from "../../src/domain/Policy.js"
import { DeliveryFailed, Transport } from "../../src/services/Transport.js"
import type { TransportService } from "../../src/services/Transport.js"
import type { DeliveryReply } from "../../src/domain/Outcomes.js"
import type { DeliveryInput } from "../../src/domain/Records.js"
import { captureLogs } from "../support/logs.js"

const production: PolicyInput = { leaseTicks: "1 minute", backoffBase: "1 second", backoffCap: "1 minute" }
const quick: RunOptions = { pollInterval: "1 hour", deliveryTimeout: "10 seconds", shutdownGrace: "30 seconds", metricsInterval: null }

/**
 * A queue and an inbox in memory, and a Relay whose transport is `script` wrapped around the
 * inbox (so a test decides per delivery what happens).
 */
const setup = (
  script: (delivery: DeliveryInput, inbox: Effect.Effect<DeliveryReply, DeliveryFailed>) => Effect.Effect<DeliveryReply, DeliveryFailed>,
  policy: PolicyInput = production
) =>
  Effect.gen(function*() {
    const maxDelta = yield* Ref.make(1000)
    const inboxLayer = SqliteInbox.layer({ filename: ":memory:", business: Counter.business(maxDelta) })
    const transport = Layer.effect(
      Transport,
      Effect.map(Inbox, (inbox): TransportService => ({
        deliver: (delivery) =>
          script(
            delivery,
            Effect.mapError(inbox.receive(delivery), (cause) =>
              new DeliveryFailed({ eventId: delivery.eventId, message: cause.message, cause }))
          )
      }))
    )
    const context = yield* Layer.build(
      Relay.layer.pipe(
        Layer.provideMerge(transport),
        Layer.provideMerge(inboxLayer),
        Layer.provideMerge(SqliteRelayQueue.layer({ filename: ":memory:", policy }))
      )
    )
    return context
  })

describe("Relay.run", () => {
  it.scoped("four workers drain every flow in order, one receipt per event", () =>
    Effect.gen(function*() {
      const context = yield* setup((_, inbox) => inbox)
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        const inbox = yield* Inbox
        for (const flow of ["A", "B", "C", "D", "E"]) {
          for (let i = 1; i <= 8; i++) yield* queue.enqueue({ eventId: `${flow}${i}`, flowId: flow, body: { delta: i } })
        }
        const relay = yield* Relay
        const running = yield* Effect.fork(relay.run({ ...quick, workers: 4 }))
        // Work until everything is acked; no clock time passes, so only local wake-ups drive it.
        for (let i = 0; i < 10_000; i++) {
          const snapshot = yield* queue.snapshot
          if (snapshot.events.every((e) => e.state === "acked")) break
          yield* Effect.yieldNow()
        }
        yield* Fiber.interrupt(running)
        const snapshot = yield* queue.snapshot
        expect(snapshot.events.every((e) => e.state === "acked" && e.generation === 1)).toBe(true)
        const receipts = yield* inbox.receipts
        expect(receipts).toHaveLength(40)
        for (const flow of ["A", "B", "C", "D", "E"]) {
          expect(receipts.filter((r) => r.flowId === flow).map((r) => r.seq)).toEqual([1, 2, 3, 4, 5, 6, 7, 8])
        }
        expect((yield* inbox.read(Counter.totals)).get("C")).toBe(36)
      }).pipe(Effect.provide(context))
    }))

  it.scoped("eight single-step workers share their transactions (group commit): every flow in order, one receipt each", () =>
    Effect.gen(function*() {
      const maxDelta = yield* Ref.make(1000)
      const context = yield* Layer.build(
        Relay.layer.pipe(
          Layer.provideMerge(Transport.layerInbox),
          Layer.provideMerge(SqliteInbox.layer({ filename: ":memory:", business: Counter.business(maxDelta) })),
          Layer.provideMerge(SqliteRelayQueue.layer({ filename: ":memory:", policy: production }))
        )
      )
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        const inbox = yield* Inbox
        const flows = Array.from({ length: 12 }, (_, f) => `F${f}`)
        yield* queue.enqueueBatch(flows.flatMap((flow) => Array.from({ length: 10 }, (_, i) => ({ eventId: `${flow}-${i + 1}`, flowId: flow, body: { delta: 1 } }))))
        const sizes = (operation: string) => Metric.value(Metric.tagged(Metrics.groupCommitSize, "operation", operation))
        const before = { claim: yield* sizes("claim"), settle: yield* sizes("settle"), deliver: yield* sizes("deliver") }
        const running = yield* Effect.fork((yield* Relay).run({ ...quick, workers: 8, batchSize: 1 }))
        for (let i = 0; i < 10_000; i++) {
          if ((yield* queue.stats).byState.acked === 120) break
          yield* Effect.yieldNow()
        }
        yield* Fiber.interrupt(running)
        const snapshot = yield* queue.snapshot
        expect(snapshot.events.every((e) => e.state === "acked" && e.generation === 1)).toBe(true)
        const receipts = yield* inbox.receipts
        expect(receipts).toHaveLength(120)
        for (const flow of flows) {
          expect(receipts.filter((r) => r.flowId === flow).map((r) => r.seq)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1))
        }
        // Fewer transactions than steps: calls made at the same moment were gathered.
        const claims = yield* sizes("claim")
        const settles = yield* sizes("settle")
        expect(claims.max).toBeGreaterThan(1)
        expect(settles.sum - before.settle.sum).toBe(120)
        expect(settles.count - before.settle.count).toBeLessThan(120)
        // The inbox takes batches: the deliveries of workers that run together are one call, and
        // never more than the eight workers' heads at once.
        const delivers = yield* sizes("deliver")
        expect(delivers.count - before.deliver.count).toBeGreaterThan(0)
        expect(delivers.count - before.deliver.count).toBeLessThan(120)
        expect(delivers.max).toBeLessThanOrEqual(8)
        expect(claims.max).toBeLessThanOrEqual(8)
      }).pipe(Effect.provide(context))
    }))

  it.scoped("a worker settles each reply and claims its next head in one queue write (settleAndClaim)", () =>
    Effect.gen(function*() {
      const context = yield* setup((_, inbox) => inbox)
      const calls: Array<string> = []
      // The queue as the worker sees it, noting each write it asks for.
      const noted = Layer.effect(
        RelayQueue,
        Effect.map(RelayQueue, (queue) => ({
          ...queue,
          claim: Effect.zipRight(Effect.sync(() => calls.push("claim")), queue.claim),
          claimUpTo: (limit: number) => Effect.zipRight(Effect.sync(() => calls.push("claimUpTo")), queue.claimUpTo(limit)),
          settle: (token: Parameters<typeof queue.settle>[0], reply: DeliveryReply) =>
            Effect.zipRight(Effect.sync(() => calls.push("settle")), queue.settle(token, reply)),
          settleBatch: (items: Parameters<typeof queue.settleBatch>[0]) =>
            Effect.zipRight(Effect.sync(() => calls.push("settleBatch")), queue.settleBatch(items)),
          settleAndClaim: (items: Parameters<typeof queue.settleAndClaim>[0], limit: number) =>
            Effect.zipRight(Effect.sync(() => calls.push(`settleAndClaim(${items.length}, ${limit})`)), queue.settleAndClaim(items, limit))
        }))
      )
      const base = Layer.succeedContext(context)
      const relay = yield* Effect.provide(Relay, Relay.layer.pipe(Layer.provide(noted), Layer.provide(base)))
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        for (let i = 1; i <= 6; i++) yield* queue.enqueue({ eventId: `A${i}`, flowId: "A", body: { delta: i } })
        const running = yield* Effect.fork(relay.run(quick))
        for (let i = 0; i < 10_000 && (yield* queue.stats).byState.acked < 6; i++) yield* Effect.yieldNow()
        yield* Fiber.interrupt(running)
        expect((yield* (yield* Inbox).receipts).map((r) => r.seq)).toEqual([1, 2, 3, 4, 5, 6])
        // The first claim alone; then each reply with the next claim (A2 only becomes a head when
        // A1 is acked, so each of these claims found the head the settle before it exposed).
        expect(calls.slice(0, 7)).toEqual(["settleAndClaim(0, 1)", ...Array.from({ length: 6 }, () => "settleAndClaim(1, 1)")])
        expect(calls.filter((call) => !call.startsWith("settleAndClaim"))).toEqual([])
      }).pipe(Effect.provide(context))
    }))

  it.scoped("an enqueue in the same process wakes a sleeping worker at once", () =>
    Effect.gen(function*() {
      const delivered = yield* Deferred.make<string>()
      const context = yield* setup((delivery, inbox) => Effect.zipLeft(inbox, Deferred.succeed(delivered, delivery.eventId)))
      yield* Effect.gen(function*() {
        const relay = yield* Relay
        const running = yield* Effect.fork(relay.run(quick))
        for (let i = 0; i < 50; i++) yield* Effect.yieldNow()
        // The worker is asleep for an hour of TestClock time; only the wake-up can reach it.
        yield* (yield* RelayQueue).enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        expect(yield* Deferred.await(delivered)).toBe("A1")
        yield* Fiber.interrupt(running)
      }).pipe(Effect.provide(context))
    }))

  /**
   * A Relay whose queue reports each idle answer the worker gets (it sleeps after one), so a test
   * acts only once the worker is asleep. The settles and redrives that wake it come from the test,
   * through the same queue instance: the worker's own settle would claim the next head itself.
   */
  const sleepingWorker = (context: Context.Context<RelayQueue | Transport>) =>
    Effect.gen(function*() {
      const idle = yield* Queue.unbounded<number | undefined>()
      const reporting = Layer.effect(
        RelayQueue,
        Effect.map(RelayQueue, (queue) => ({
          ...queue,
          settleAndClaim: (items: Parameters<typeof queue.settleAndClaim>[0], limit: number) =>
            Effect.tap(queue.settleAndClaim(items, limit), (result) =>
              result.claims.length === 0 ? Queue.offer(idle, result.wakeAt) : Effect.void)
        }))
      )
      const relay = yield* Effect.provide(Relay, Relay.layer.pipe(Layer.provide(reporting), Layer.provide(Layer.succeedContext(context))))
      return { relay, idle }
    })

  /** Yields until `done` holds, a bounded number of times: no clock time passes meanwhile. */
  const settled = (done: Effect.Effect<boolean>) =>
    Effect.gen(function*() {
      for (let i = 0; i < 10_000 && !(yield* done); i++) yield* Effect.yieldNow()
      return yield* done
    })

  it.scoped("an ack made by another caller wakes a worker asleep on a long wait, and it claims the head the ack exposed", () =>
    Effect.gen(function*() {
      const delivered = yield* Ref.make<ReadonlyArray<string>>([])
      const context = yield* setup((delivery, inbox) => Effect.zipLeft(inbox, Ref.update(delivered, (ids) => [...ids, delivery.eventId])))
      const { idle, relay } = yield* sleepingWorker(context)
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        const inbox = yield* Inbox
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        yield* queue.enqueue({ eventId: "A2", flowId: "A", body: { delta: 2 } })
        // Another caller holds A1: A2 is not a head yet.
        const claim = yield* queue.claim
        if (claim._tag !== "Claimed") return expect.fail("A1 was not claimed")
        const running = yield* Effect.fork(relay.run(quick))
        // The worker found nothing and sleeps until A1's lease ends, a minute of TestClock time away.
        expect(yield* Queue.take(idle)).toBe(60_000)
        expect(yield* inbox.receive({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 1 } })).toEqual({ _tag: "Accepted" })
        expect(yield* queue.settle(claim.token, { _tag: "Accepted" })).toMatchObject({ _tag: "Acked" })
        // No time passes: only the ack's wake-up can make the worker claim A2 now.
        expect(yield* settled(Effect.map(Ref.get(delivered), (ids) => ids.length > 0))).toBe(true)
        expect(yield* Ref.get(delivered)).toEqual(["A2"])
        expect(yield* TestClock.currentTimeMillis).toBe(0)
        yield* Fiber.interrupt(running)
      }).pipe(Effect.provide(context))
    }))

  it.scoped("a redrive wakes a worker asleep for the poll interval, and it claims the redriven head", () =>
    Effect.gen(function*() {
      const delivered = yield* Ref.make<ReadonlyArray<string>>([])
      const context = yield* setup((delivery, inbox) => Effect.zipLeft(inbox, Ref.update(delivered, (ids) => [...ids, delivery.eventId])))
      const { idle, relay } = yield* sleepingWorker(context)
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        const claim = yield* queue.claim
        if (claim._tag !== "Claimed") return expect.fail("A1 was not claimed")
        expect(yield* queue.settle(claim.token, { _tag: "Rejected", code: "broken" })).toMatchObject({ _tag: "Quarantined" })
        const running = yield* Effect.fork(relay.run(quick))
        // Nothing is due, ever: the worker sleeps the poll interval, an hour.
        expect(yield* Queue.take(idle)).toBeUndefined()
        yield* queue.redrive({ eventId: "A1", expectedGeneration: 1, reason: "fixed" })
        expect(yield* settled(Effect.map(Ref.get(delivered), (ids) => ids.length > 0))).toBe(true)
        expect(yield* Ref.get(delivered)).toEqual(["A1"])
        yield* Fiber.interrupt(running)
      }).pipe(Effect.provide(context))
    }))

  it.scoped("an idle worker sleeps only until the next head becomes eligible", () =>
    Effect.gen(function*() {
      const attempts = yield* Ref.make(0)
      const second = yield* Deferred.make<void>()
      const context = yield* setup((_, inbox) =>
        Effect.flatMap(Ref.updateAndGet(attempts, (n) => n + 1), (n) =>
          n === 1 ? Effect.succeed({ _tag: "Retry", reason: "unavailable" } as const) : Effect.zipLeft(inbox, Deferred.succeed(second, undefined))))
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        const running = yield* Effect.fork((yield* Relay).run(quick))
        const retried = Effect.map(queue.snapshot, (s) => s.events[0]!.state === "ready" && s.events[0]!.attempts === 1)
        for (let i = 0; i < 500 && !(yield* retried); i++) yield* Effect.yieldNow()
        expect((yield* queue.snapshot).events[0]).toMatchObject({ state: "ready", nextAt: 1000 })
        // The backoff is 1 s, the poll interval an hour: advancing 1 s must be enough.
        yield* TestClock.adjust("1 second")
        yield* Deferred.await(second)
        yield* Fiber.interrupt(running)
        expect((yield* queue.snapshot).events[0]).toMatchObject({ state: "acked", attempts: 2 })
      }).pipe(Effect.provide(context))
    }))

  it.scoped("a delivery that outlives the timeout is settled as Retry with the reason", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const context = yield* setup((_, inbox) => Effect.zipRight(Deferred.succeed(started, undefined), Effect.zipRight(Effect.never, inbox)), {
        ...production,
        retryBudget: 1
      })
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        const running = yield* Effect.fork((yield* Relay).run(quick))
        yield* Deferred.await(started)
        yield* TestClock.adjust("10 seconds")
        for (let i = 0; i < 200 && (yield* queue.snapshot).events[0]!.state === "inflight"; i++) yield* Effect.yieldNow()
        yield* Fiber.interrupt(running)
        expect((yield* queue.snapshot).events[0]).toMatchObject({ state: "quarantined", reason: "delivery timeout after 10s" })
      }).pipe(Effect.provide(context))
    }))

  it.scoped("a transport failure or defect is settled as Retry, never a dead loop or an ack", () =>
    Effect.gen(function*() {
      const context = yield* setup((delivery) =>
        delivery.flowId === "A"
          ? Effect.fail(new DeliveryFailed({ eventId: delivery.eventId, message: "connection refused", cause: null }))
          : Effect.die(new Error("boom")), { ...production, retryBudget: 1 })
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        yield* queue.enqueue({ eventId: "B1", flowId: "B", body: { delta: 1 } })
        const running = yield* Effect.fork((yield* Relay).run(quick))
        for (let i = 0; i < 500 && (yield* queue.snapshot).events.some((e) => e.state !== "quarantined"); i++) yield* Effect.yieldNow()
        yield* Fiber.interrupt(running)
        const [a1, b1] = (yield* queue.snapshot).events
        expect(a1).toMatchObject({ state: "quarantined", reason: "transport: connection refused", attempts: 1 })
        expect(b1).toMatchObject({ state: "quarantined", reason: "transport: boom", attempts: 1 })
      }).pipe(Effect.provide(context))
    }))

  /**
   * The transport logs inside each delivery; flow A's delivery fails. Both the transport's log and
   * the worker's line about it (at Debug: `run` tells retries per flow) carry the worker, the event and its flow. The worker's delivery has a
   * fiber of its own under a real-time clock and runs under `Effect.timeout` under TestClock.
   */
  const annotatedLogs = (pause: Effect.Effect<void>) => Effect.gen(function*() {
    const context = yield* setup((delivery, inbox) =>
      Effect.zipRight(
        Effect.logInfo(`delivering ${delivery.eventId}`),
        delivery.flowId === "A" ? Effect.fail(new DeliveryFailed({ eventId: delivery.eventId, message: "refused", cause: null })) : inbox
      ), { ...production, retryBudget: 1 })
    const { layer, logs } = captureLogs()
    yield* Effect.gen(function*() {
      const queue = yield* RelayQueue
      yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
      yield* queue.enqueue({ eventId: "B1", flowId: "B", body: { delta: 1 } })
      const running = yield* Effect.fork((yield* Relay).run(quick).pipe(Logger.withMinimumLogLevel(LogLevel.Debug), Effect.provide(layer)))
      const settled = queue.snapshot.pipe(Effect.map(({ events }) => events.filter((e) => e.state === "acked" || e.state === "quarantined").length))
      for (let i = 0; i < 500 && (yield* settled) < 2; i++) yield* pause
      yield* Fiber.interrupt(running)
    }).pipe(Effect.provide(context))
    const annotationsOf = (message: string) => logs.find((log) => log.message.includes(message))?.annotations
    expect(annotationsOf("delivering A1")).toMatchObject({ worker: 0, eventId: "A1", flowId: "A" })
    expect(annotationsOf("delivering B1")).toMatchObject({ worker: 0, eventId: "B1", flowId: "B" })
    expect(annotationsOf("delivery got no reply")).toMatchObject({ worker: 0, eventId: "A1", flowId: "A" })
    // The event's annotations stay with its delivery: the worker's own logs after it have none.
    expect(annotationsOf("relay stopped")).toBeDefined()
    expect(annotationsOf("relay stopped")).not.toHaveProperty("eventId")
  })

  it.scoped("a delivery's logs and the worker's line about its failure carry the worker, the event and its flow (TestClock)", () =>
    annotatedLogs(Effect.yieldNow()))

  it.live("a delivery's logs and the worker's line about its failure carry the worker, the event and its flow (the default clock)", () =>
    Effect.scoped(annotatedLogs(Effect.sleep("1 millis"))))

  it.scoped("a batch worker counts every delivery of a batch in the delivery metrics, failed or answered", () =>
    Effect.gen(function*() {
      const calls = yield* Ref.make(0)
      const transport: TransportService = {
        deliver: () => Effect.dieMessage("a batch worker delivers through deliverBatch"),
        // The first batch gets no reply; the next is accepted.
        deliverBatch: (deliveries) =>
          Effect.flatMap(Ref.getAndUpdate(calls, (n) => n + 1), (n) =>
            n === 0
              ? Effect.fail(new DeliveryFailed({ eventId: deliveries[0]!.eventId, message: "connection refused", cause: null }))
              : Effect.succeed(deliveries.map((): DeliveryReply => ({ _tag: "Accepted" }))))
      }
      const context = yield* Layer.build(
        Relay.layer.pipe(
          Layer.provideMerge(Layer.succeed(Transport, transport)),
          Layer.provideMerge(SqliteRelayQueue.layer({ filename: ":memory:", policy: production }))
        )
      )
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        yield* queue.enqueueBatch(["X", "Y", "Z"].map((flow) => ({ eventId: `${flow}1`, flowId: flow, body: { delta: 1 } })))
        const failuresBefore = (yield* Metric.value(Metrics.deliveryFailures)).count
        const latenciesBefore = (yield* Metric.value(Metrics.deliveryLatency)).count
        const running = yield* Effect.fork((yield* Relay).run({ ...quick, batchSize: 3 }))
        for (let i = 0; i < 500 && (yield* queue.snapshot).events.some((e) => e.attempts === 0); i++) yield* Effect.yieldNow()
        // The three were settled as Retry (due in 1 s); then they are claimed and delivered again.
        yield* TestClock.adjust("2 seconds")
        for (let i = 0; i < 500 && (yield* queue.stats).byState.acked < 3; i++) yield* Effect.yieldNow()
        yield* Fiber.interrupt(running)
        expect((yield* queue.snapshot).events.map((e) => [e.eventId, e.state, e.attempts])).toEqual([
          ["X1", "acked", 2],
          ["Y1", "acked", 2],
          ["Z1", "acked", 2]
        ])
        // Two batches, nothing sent for an empty hand.
        expect(yield* Ref.get(calls)).toBe(2)
        expect((yield* Metric.value(Metrics.deliveryFailures)).count - failuresBefore).toBe(3)
        expect((yield* Metric.value(Metrics.deliveryLatency)).count - latenciesBefore).toBe(3)
      }).pipe(Effect.provide(context))
    }))

  it.scoped("shutdown lets an in-flight delivery finish within the grace period", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const context = yield* setup((_, inbox) =>
        Effect.zipRight(Deferred.succeed(started, undefined), Effect.zipRight(Deferred.await(release), inbox)))
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        yield* queue.enqueue({ eventId: "A2", flowId: "A", body: { delta: 1 } })
        const running = yield* Effect.fork((yield* Relay).run(quick))
        yield* Deferred.await(started)
        const stopping = yield* Effect.fork(Fiber.interrupt(running))
        for (let i = 0; i < 50; i++) yield* Effect.yieldNow()
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(stopping)
        // A1 finished and was settled; no new claim was made after the stop (A2 untouched).
        const [a1, a2] = (yield* queue.snapshot).events
        expect(a1).toMatchObject({ state: "acked" })
        expect(a2).toMatchObject({ state: "ready", attempts: 0 })
      }).pipe(Effect.provide(context))
    }))

  it.scoped("after the grace period an in-flight delivery is interrupted and nothing is settled", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const context = yield* setup((_, inbox) => Effect.zipRight(Deferred.succeed(started, undefined), Effect.zipRight(Effect.never, inbox)))
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        const running = yield* Effect.fork((yield* Relay).run({ ...quick, deliveryTimeout: "50 seconds" }))
        yield* Deferred.await(started)
        const stopping = yield* Effect.fork(Fiber.interrupt(running))
        // Step the clock through the 30 s grace (the 50 s delivery timeout is never reached).
        for (let i = 0; i < 45 && (yield* Fiber.poll(stopping))._tag === "None"; i++) {
          for (let j = 0; j < 20; j++) yield* Effect.yieldNow()
          yield* TestClock.adjust("1 second")
        }
        yield* Fiber.join(stopping)
        // The claim stands (inflight under generation 1) and lapses with its lease.
        expect((yield* queue.snapshot).events[0]).toMatchObject({ state: "inflight", generation: 1, attempts: 1 })
        expect(yield* (yield* Inbox).receipts).toEqual([])
      }).pipe(Effect.provide(context))
    }))

  it.scoped("a lease not longer than the delivery timeout is a typed configuration error", () =>
    Effect.gen(function*() {
      const context = yield* setup((_, inbox) => inbox, { leaseTicks: "10 seconds" })
      yield* Effect.gen(function*() {
        const relay = yield* Relay
        const exit = yield* Effect.exit(relay.run({ deliveryTimeout: "10 seconds" }))
        expect(exit).toMatchObject({ _tag: "Failure", cause: { error: { _tag: "RelayConfigError" } } })
        const bad = yield* Effect.exit(relay.run({ deliveryTimeout: "1 second", workers: 0 }))
        expect(bad).toMatchObject({ _tag: "Failure", cause: { error: { _tag: "RelayConfigError" } } })
      }).pipe(Effect.provide(context))
    }))
})

describe("runtime options", () => {
  it.effect("runConfig reads the worker options from the environment", () =>
    Effect.gen(function*() {
      const options = yield* runConfig.pipe(
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["FAIR_RELAY_WORKERS", "4"], ["FAIR_RELAY_DELIVERY_TIMEOUT", "5 seconds"]])))
      )
      expect(options.workers).toBe(4)
      expect(options.batchSize).toBe(1)
      expect(Duration.toMillis(Duration.decode(options.deliveryTimeout!))).toBe(5000)
    }))

  it.scoped("full jitter draws each retry delay from [0, schedule) with the seedable Random", () =>
    Effect.gen(function*() {
      const draws = (seed: number) =>
        Effect.gen(function*() {
          const queue = yield* SqliteRelayQueue.make({ filename: ":memory:", policy: { jitter: "full", backoffBase: 1000, backoffCap: 1000, retryBudget: 100, leaseTicks: 10 } })
          const nextAts: Array<number> = []
          for (let i = 0; i < 20; i++) {
            yield* queue.enqueue({ eventId: `e${i}`, flowId: `f${i}`, body: {} })
            const claimed = yield* queue.claim
            if (claimed._tag !== "Claimed") return yield* Effect.dieMessage("expected a claim")
            const outcome = yield* queue.settle(claimed.token, { _tag: "Retry", reason: "x" })
            if (outcome._tag !== "RetryScheduled") return yield* Effect.dieMessage("expected a retry")
            nextAts.push(outcome.nextAt)
          }
          return nextAts
        }).pipe(Effect.withRandom(Random.make(seed)))
      const first = yield* draws(7)
      expect(yield* draws(7)).toEqual(first)
      expect(first.every((t) => t >= 0 && t < 1000)).toBe(true)
      expect(new Set(first).size).toBeGreaterThan(5)
    }))

  it.scoped("clamp mode reckons with the caller's own clock when it is behind, keeps the persisted tick and counts it", () =>
    Effect.gen(function*() {
      const queue = yield* SqliteRelayQueue.make({ filename: ":memory:", policy: { ...seedPolicy, clock: "clamp", backoffBase: 500, backoffCap: 1000 } })
      yield* TestClock.setTime(100)
      yield* queue.enqueue({ eventId: "A1", flowId: "A", body: {} })
      const before = (yield* Metric.value(Metrics.clockClamped)).count
      // A process whose clock is 90 ms behind: its writes go through, on its own time line.
      yield* TestClock.setTime(10)
      expect(yield* queue.enqueue({ eventId: "A2", flowId: "A", body: {} })).toEqual({ _tag: "Enqueued", seq: 2 })
      const claimed = yield* queue.claim
      expect(claimed._tag).toBe("Idle") // A1 is due at 100 on the persisted time line
      yield* TestClock.setTime(100)
      const a1 = yield* queue.claim
      if (a1._tag !== "Claimed") return expect.unreachable()
      yield* TestClock.setTime(20)
      // The backoff of a retry decided by the lagging clock is 500 ms from *its* now, not from the
      // persisted tick: a skew changes a delay by no more than the skew.
      expect(yield* queue.settle(a1.token, { _tag: "Retry", reason: "x" })).toEqual({ _tag: "RetryScheduled", nextAt: 520 })
      const snapshot = yield* queue.snapshot
      expect(snapshot.clock.tick).toBe(100)
      expect(snapshot.events[1]!.nextAt).toBe(10)
      expect((yield* Metric.value(Metrics.clockClamped)).count).toBe(before + 3)
    }))

  it.scoped("a process whose clock ran a day ahead cannot freeze the store; an operator resets the clock", () =>
    Effect.gen(function*() {
      const day = 86_400_000
      const queue = yield* SqliteRelayQueue.make({ filename: ":memory:", policy: { ...seedPolicy, clock: "clamp", leaseTicks: 1000 } })
      yield* TestClock.setTime(1000)
      yield* queue.enqueue({ eventId: "A1", flowId: "A", body: {} })
      yield* queue.enqueue({ eventId: "B1", flowId: "B", body: {} })
      // The wrong process claims A1 a day ahead: the persisted tick jumps, A1's lease ends in a day.
      yield* TestClock.setTime(1000 + day)
      const stuck = yield* queue.claim
      if (stuck._tag !== "Claimed") return expect.unreachable()
      // Correct processes keep working (no ClockRegressed) on B.
      yield* TestClock.setTime(2000)
      expect(yield* queue.enqueue({ eventId: "B2", flowId: "B", body: {} })).toEqual({ _tag: "Enqueued", seq: 2 })
      const b1 = yield* queue.claim
      if (b1._tag !== "Claimed") return expect.unreachable()
      expect(b1.event.eventId).toBe("B1")
      // A1 stays leased for a day, until an operator resets the clock: its lease then ends now.
      const reset = yield* queue.resetClock({ reason: "host clock was a day ahead", actor: "ops" })
      expect(reset).toEqual({ before: 1000 + day, after: 2000, eventsAdjusted: 1 })
      const again = yield* queue.claimBatch(2)
      expect(again.map((c) => c.event.eventId)).toEqual(["A1"])
      expect((yield* queue.snapshot).clock.tick).toBe(2000)
      expect(yield* Effect.flip(queue.resetClock({ reason: "  " }))).toMatchObject({ _tag: "InvalidInput" })
    }))
})
