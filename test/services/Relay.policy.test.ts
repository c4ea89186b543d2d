/**
 * A live policy change: `setPolicy` in one queue instance (another process, as far as the store
 * is concerned) reaches a running `relay.run` of another within its `policyInterval`, without a
 * restart; audited; bad changes are typed errors that change nothing; every backend keeps it.
 */
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Either, Fiber, Layer, Ref, TestClock } from "effect"
import * as path from "node:path"
import { Inbox } from "../../src/services/Inbox.js"
import { Relay } from "../../src/services/Relay.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import { Transport } from "../../src/services/Transport.js"
import type { TransportService } from "../../src/services/Transport.js"
import * as SqliteInbox from "../../src/layers/SqliteInbox.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import * as Counter from "../../src/sample/Counter.js"
import { backends, describeSkipped, tempDir } from "../support/backends.js"

const minute = 60_000
const hour = 60 * minute
const day = 24 * hour

describe("Relay.run and a live policy change", () => {
  it.scoped("a lease changed in another queue instance is taken up by the running relay's next claim, without a restart", () =>
    Effect.gen(function*() {
      const file = path.join(yield* tempDir, "queue.db")
      const policy = { leaseTicks: "1 minute", backoffBase: "1 second", backoffCap: "1 minute" } as const
      const delivering = yield* Deferred.make<string>()
      const release = yield* Deferred.make<void>()
      const transport = Layer.effect(
        Transport,
        Effect.map(Inbox, (): TransportService => ({
          // A delivery waits, once it has said so, until the test lets it go: its event stays in flight with the lease it was claimed with.
          deliver: (delivery) =>
            Effect.zipRight(Deferred.succeed(delivering, delivery.eventId), Effect.as(Deferred.await(release), { _tag: "Accepted" } as const))
        }))
      )
      const context = yield* Layer.build(
        Relay.layer.pipe(
          Layer.provideMerge(transport),
          Layer.provideMerge(SqliteInbox.layer({ filename: ":memory:", business: Counter.business(yield* Ref.make(1000)) })),
          Layer.provideMerge(SqliteRelayQueue.layer({ filename: file, policy }))
        )
      )
      const operator = yield* SqliteRelayQueue.make({ filename: file })
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        const running = yield* Effect.fork((yield* Relay).run({
          pollInterval: "1 hour",
          deliveryTimeout: "10 seconds",
          metricsInterval: null,
          pruneInterval: null,
          policyInterval: "5 seconds"
        }))
        for (let i = 0; i < 50; i++) yield* Effect.yieldNow()
        const change = yield* operator.setPolicy({ policy: { leaseTicks: "3 minutes" }, reason: "slow receiver", actor: "ops" })
        expect(change).toMatchObject({ changed: ["leaseTicks"], policy: { leaseTicks: 3 * minute } })
        expect(queue.policy.leaseTicks).toBe(minute)
        yield* TestClock.adjust("5 seconds")
        for (let i = 0; i < 500 && queue.policy.leaseTicks !== 3 * minute; i++) yield* Effect.yieldNow()
        expect(queue.policy.leaseTicks).toBe(3 * minute)
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        expect(yield* Deferred.await(delivering)).toBe("A1")
        const now = yield* Effect.clockWith((c) => c.currentTimeMillis)
        expect((yield* queue.inspect("A1")).event).toMatchObject({ state: "inflight", leaseUntil: now + 3 * minute })
        expect((yield* queue.audit()).map((a) => [a.action, a.target, a.actor, a.reason])).toEqual([
          ["policy", JSON.stringify({ leaseTicks: 3 * minute }), "ops", "slow receiver"]
        ])
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.interrupt(running)
      }).pipe(Effect.provide(context))
    }))
})

describe("a policy change in an instance that has not read the store's latest", () => {
  it.scoped("changes only the settings it names: another instance's change to the others stays", () =>
    Effect.gen(function*() {
      const file = path.join(yield* tempDir, "queue.db")
      const stale = yield* SqliteRelayQueue.make({ filename: file })
      const other = yield* SqliteRelayQueue.make({ filename: file })
      yield* other.setPolicy({ policy: { retryBudget: 5, backoffCap: "2 seconds" }, reason: "outage", actor: "ops" })
      // `stale` never refreshed: it still runs the defaults, yet its change keeps the other's.
      const change = yield* stale.setPolicy({ policy: { leaseTicks: "20 seconds" }, reason: "slow receiver", actor: "ops" })
      expect(change.changed).toEqual(["leaseTicks"])
      expect(yield* other.refreshPolicy).toMatchObject({ leaseTicks: 20_000, retryBudget: 5, backoffCap: 2_000 })
    }))
})

describe("a live retention change", () => {
  it.scoped("another queue instance adopts the store's retention at its refresh or its next prune, over the one it was opened with", () =>
    Effect.gen(function*() {
      const file = path.join(yield* tempDir, "queue.db")
      const worker = yield* SqliteRelayQueue.make({ filename: file, retention: { acked: "7 days", dedup: "30 days" } })
      const operator = yield* SqliteRelayQueue.make({ filename: file })
      yield* worker.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
      const claimed = yield* worker.claim
      if (claimed._tag !== "Claimed") return expect.unreachable("A1 is eligible")
      expect((yield* worker.settle(claimed.token, { _tag: "Accepted" }))._tag).toBe("Acked")
      const change = yield* operator.setPolicy({ retention: { acked: "1 hour" }, reason: "disk filling", actor: "ops" })
      expect(change).toMatchObject({ changed: ["retention.acked"], retention: { acked: hour, dedup: 30 * day } })
      expect(worker.retention).toEqual({ acked: 7 * day, dedup: 30 * day })
      yield* worker.refreshPolicy
      expect(worker.retention).toEqual({ acked: hour, dedup: 30 * day })
      // A third instance that never refreshed prunes by the store's retention too.
      const reader = yield* SqliteRelayQueue.make({ filename: file })
      yield* TestClock.adjust("2 hours")
      expect(yield* reader.prune()).toEqual({ events: 1, dedup: 0, dryRun: false })
      expect(reader.retention).toEqual({ acked: hour, dedup: 30 * day })
    }))

  it.scoped("relay.run's periodic prune deletes what the store's new retention lets go, without a restart", () =>
    Effect.gen(function*() {
      const file = path.join(yield* tempDir, "queue.db")
      const context = yield* Layer.build(
        Relay.layer.pipe(
          Layer.provideMerge(Transport.layerInbox),
          Layer.provideMerge(SqliteInbox.layer({ filename: ":memory:", business: Counter.business(yield* Ref.make(1000)) })),
          Layer.provideMerge(SqliteRelayQueue.layer({ filename: file }))
        )
      )
      const operator = yield* SqliteRelayQueue.make({ filename: file })
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        const running = yield* Effect.fork((yield* Relay).run({
          pollInterval: "1 second",
          deliveryTimeout: "10 seconds",
          metricsInterval: null,
          pruneInterval: "1 minute",
          policyInterval: null
        }))
        for (let i = 0; i < 500 && (yield* queue.inspect("A1")).event?.state !== "acked"; i++) yield* Effect.yieldNow()
        expect((yield* queue.inspect("A1")).event?.state).toBe("acked")
        yield* operator.setPolicy({ retention: { acked: "10 seconds" }, reason: "disk filling" })
        yield* TestClock.adjust("1 minute")
        const pruned = Effect.map(Effect.either(queue.inspect("A1")), Either.isLeft)
        for (let i = 0; i < 500 && !(yield* pruned); i++) yield* Effect.yieldNow()
        expect((yield* Effect.flip(queue.inspect("A1")))._tag).toBe("EventNotFound")
        expect(queue.retention.acked).toBe(10_000)
        yield* Fiber.interrupt(running)
      }).pipe(Effect.provide(context))
    }))
})

const suite = (backend: (typeof backends)[number]) => {
  it.scoped("setPolicy({ retention }) changes what prune deletes, audited; a bad window is a typed error that changes nothing", () =>
    Effect.gen(function*() {
      const w = yield* backend.world()
      yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
      const claimed = yield* w.claim
      expect((yield* w.queue.settle(claimed.token, { _tag: "Accepted" }))._tag).toBe("Acked")
      yield* TestClock.adjust("2 hours")
      // The default retention keeps an acked event 7 days.
      expect(yield* w.queue.prune({ dryRun: true })).toEqual({ events: 0, dedup: 0, dryRun: true })
      const refused = Effect.map(Effect.flip(w.queue.setPolicy({ retention: { acked: "soon" } as never, reason: "x" })), (e) => e._tag)
      expect(yield* refused).toBe("InvalidInput")
      expect(yield* Effect.map(Effect.flip(w.queue.setPolicy({ retention: { kept: "1 hour" } as never, reason: "x" })), (e) => e._tag))
        .toBe("InvalidInput")
      expect(yield* w.queue.audit()).toEqual([])
      expect(yield* w.queue.setPolicy({ retention: { acked: "1 hour" }, reason: "disk filling", actor: "ops" }))
        .toMatchObject({ changed: ["retention.acked"], retention: { acked: hour, dedup: 30 * day } })
      expect((yield* w.queue.audit()).map((a) => [a.action, a.target, a.actor, a.reason])).toEqual([
        ["policy", JSON.stringify({ "retention.acked": hour }), "ops", "disk filling"]
      ])
      // The same window again changes nothing and records nothing.
      expect(yield* w.queue.setPolicy({ retention: { acked: "1 hour" }, reason: "again" })).toMatchObject({ changed: [] })
      expect(yield* w.queue.prune()).toEqual({ events: 1, dedup: 0, dryRun: false })
      expect((yield* Effect.flip(w.queue.inspect("A1")))._tag).toBe("EventNotFound")
      // The protocol settings were left as they were.
      expect(yield* w.queue.refreshPolicy).toEqual(w.queue.policy)
      expect(w.queue.retention).toEqual({ acked: hour, dedup: 30 * day })
    }))


  it.scoped("setPolicy changes the store's settings, audited, and the next settle runs them; bad changes are typed errors that change nothing", () =>
    Effect.gen(function*() {
      const w = yield* backend.world({ policy: { retryBudget: 3 } })
      const refused = (input: Parameters<typeof w.queue.setPolicy>[0]) => Effect.map(Effect.flip(w.queue.setPolicy(input)), (e) => e._tag)
      expect(yield* refused({ policy: { retryBudget: 0 }, reason: "x" })).toBe("InvalidInput")
      expect(yield* refused({ policy: {}, reason: "x" })).toBe("InvalidInput")
      expect(yield* refused({ policy: { admission: "tail" } as never, reason: "x" })).toBe("InvalidInput")
      expect(yield* refused({ policy: { retryBudget: 5 }, reason: " " })).toBe("InvalidInput")
      expect(yield* w.queue.audit()).toEqual([])
      expect(yield* w.queue.setPolicy({ policy: { retryBudget: 5, backoffCap: "2 seconds" }, reason: "outage" }))
        .toMatchObject({ changed: ["retryBudget", "backoffCap"], policy: { retryBudget: 5, backoffCap: 2000 } })
      expect(w.queue.policy).toMatchObject({ retryBudget: 5, backoffCap: 2000 })
      // The same settings again change nothing and record nothing.
      expect(yield* w.queue.setPolicy({ policy: { retryBudget: 5 }, reason: "again" })).toMatchObject({ changed: [] })
      expect((yield* w.queue.audit()).map((a) => a.action)).toEqual(["policy"])
      // A retry budget of 5 now: the head is quarantined on its fifth failure, not its third.
      yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
      for (let i = 1; i <= 5; i++) {
        yield* TestClock.adjust("1 hour")
        const claimed = yield* w.claim
        const outcome = yield* w.queue.settle(claimed.token, { _tag: "Retry", reason: "down" })
        expect(outcome._tag).toBe(i < 5 ? "RetryScheduled" : "Quarantined")
      }
      expect(yield* w.queue.refreshPolicy).toMatchObject({ retryBudget: 5 })
    }))
}

for (const backend of backends) describe(backend.name, () => suite(backend))
describeSkipped(suite)
