/**
 * Operating through an incident, on every backend: the last Retry reason kept on the event,
 * discarding a quarantined head (audited, never delivered, its flow moves on), and the guards
 * that refuse a discard without changing anything.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, TestClock } from "effect"
import { backends, skippedBackends } from "../support/backends.js"
import type { RelayQueueService } from "../../src/services/RelayQueue.js"
import type { Backend } from "../support/backends.js"

const day = Duration.toMillis(Duration.days(1))

/**
 * Claims and acks every head the queue hands out, in claim order (the queue's side alone: a
 * receiver that checks seqs answers the event after a discarded one `Gap`, see docs/operator.md).
 */
const drain = (w: { readonly queue: RelayQueueService }) =>
  Effect.gen(function*() {
    const delivered: Array<string> = []
    for (let i = 0; i < 100; i++) {
      const claimed = yield* w.queue.claim
      if (claimed._tag === "Idle") break
      delivered.push(claimed.event.eventId)
      expect(yield* w.queue.settle(claimed.token, { _tag: "Accepted" })).toEqual({ _tag: "Acked" })
    }
    return delivered
  })

const suite = (backend: Backend) => {
  /** A1 quarantined (its delta is over the receiver's limit), A2 and A3 behind it, B1 in another flow. */
  const quarantinedA1 = Effect.gen(function*() {
    const w = yield* backend.world({ maxDelta: 5 })
    yield* w.queue.enqueueBatch([
      { eventId: "A1", flowId: "A", body: { delta: 10 } },
      { eventId: "A2", flowId: "A", body: { delta: 2 } },
      { eventId: "A3", flowId: "A", body: { delta: 3 } },
      { eventId: "B1", flowId: "B", body: { delta: 1 } }
    ])
    expect(yield* w.step).toMatchObject({ eventId: "A1", outcome: { _tag: "Quarantined" } })
    return w
  })

  describe("the last Retry reason", () => {
    it.scoped("is kept on the event while it backs off, and a long one is cut to 1 KiB with a marker", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        const first = yield* w.claim
        expect(yield* w.queue.settle(first.token, { _tag: "Retry", reason: "receiver unavailable: 503" })).toMatchObject({ _tag: "RetryScheduled" })
        expect((yield* w.queue.inspect("A1")).event).toMatchObject({ state: "ready", reason: "receiver unavailable: 503" })

        yield* TestClock.adjust("1 hour")
        const second = yield* w.claim
        yield* w.queue.settle(second.token, { _tag: "Retry", reason: "é".repeat(2000) })
        const kept = (yield* w.queue.inspect("A1")).event.reason!
        expect(Buffer.byteLength(kept, "utf8")).toBeLessThanOrEqual(1024)
        expect(kept.endsWith("…[cut]")).toBe(true)
        expect(kept.startsWith("é".repeat(500))).toBe(true)
      }))
  })

  describe("discard", () => {
    it.scoped("a discarded head is never delivered; its flow's next event is, in order, and the audit says who and why", () =>
      Effect.gen(function*() {
        const w = yield* quarantinedA1
        const { event } = yield* w.queue.inspect("A1")
        expect(yield* w.queue.discard({ eventId: "A1", expectedGeneration: event.generation, reason: "poison: delta over limit", actor: "ops" }))
          .toEqual({ _tag: "Discarded", generation: event.generation + 1, nextHead: "A2" })
        const delivered = yield* drain(w)
        expect(delivered.filter((id) => id.startsWith("A"))).toEqual(["A2", "A3"])
        expect(delivered).not.toContain("A1")
        const snapshot = yield* w.queue.snapshot
        expect(snapshot.events.find((e) => e.eventId === "A1")).toMatchObject({ state: "discarded", generation: event.generation + 1 })
        expect(snapshot.audit).toEqual([
          { eventId: "A1", reason: "poison: delta over limit", generation: event.generation + 1, tick: expect.any(Number), actor: "ops", action: "discard", target: null }
        ])
        expect((yield* w.queue.stats).byState).toMatchObject({ discarded: 1, acked: 3, quarantined: 0 })
      }))

    it.scoped("the last event of a flow discarded leaves the flow drained; a later event of it is delivered", () =>
      Effect.gen(function*() {
        const w = yield* backend.world({ maxDelta: 5 })
        yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 10 } })
        yield* w.step
        expect(yield* w.queue.discard({ eventId: "A1", expectedGeneration: 1, reason: "poison" })).toMatchObject({ nextHead: null })
        expect((yield* w.queue.snapshot).flows).toMatchObject([{ flowId: "A", headSeq: null, eligibleAt: null }])
        expect(yield* drain(w)).toEqual([])
        yield* w.queue.enqueue({ eventId: "A2", flowId: "A", body: { delta: 1 } })
        expect(yield* drain(w)).toEqual(["A2"])
      }))

    it.scoped("not quarantined, a wrong generation, a blank reason or an unknown id are typed errors that change nothing", () =>
      Effect.gen(function*() {
        const w = yield* quarantinedA1
        const before = yield* w.queue.snapshot
        const refused = (input: Parameters<typeof w.queue.discard>[0]) => Effect.map(Effect.flip(w.queue.discard(input)), (e) => e._tag)
        expect(yield* refused({ eventId: "A2", expectedGeneration: 0, reason: "x" })).toBe("NotQuarantined")
        expect(yield* refused({ eventId: "A1", expectedGeneration: 7, reason: "x" })).toBe("GenerationMismatch")
        expect(yield* refused({ eventId: "A1", expectedGeneration: 1, reason: " \t" })).toBe("MissingReason")
        expect(yield* refused({ eventId: "nope", expectedGeneration: 1, reason: "x" })).toBe("EventNotFound")
        expect(yield* refused({ eventId: "", expectedGeneration: 1, reason: "x" })).toBe("InvalidInput")
        expect(yield* w.queue.snapshot).toEqual(before)
        // A discard is final: a second one, or a redrive, of the same generation is refused.
        yield* w.queue.discard({ eventId: "A1", expectedGeneration: 1, reason: "poison" })
        expect(yield* refused({ eventId: "A1", expectedGeneration: 1, reason: "again" })).toBe("NotQuarantined")
        expect(yield* Effect.map(Effect.flip(w.queue.redrive({ eventId: "A1", expectedGeneration: 2, reason: "undo" })), (e) => e._tag))
          .toBe("NotQuarantined")
      }))

    it.scoped("retention prunes a discarded event as it prunes an acked one; its id stays known", () =>
      Effect.gen(function*() {
        const w = yield* quarantinedA1
        yield* w.queue.discard({ eventId: "A1", expectedGeneration: 1, reason: "poison" })
        yield* TestClock.adjust(Duration.millis(8 * day))
        expect((yield* w.queue.prune()).events).toBe(1)
        const events = (yield* w.queue.snapshot).events.map((e) => e.eventId)
        expect(events).not.toContain("A1")
        expect(events).toContain("A2")
        expect(yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 10 } })).toEqual({ _tag: "Existing", seq: 1 })
      }))
  })
}

for (const backend of backends) describe(backend.name, () => suite(backend))
for (const name of skippedBackends) describe.skip(name, () => it("contract suite", () => {}))
