/**
 * The scenarios of docs/protocol.md at the service level, against the SQLite queue and inbox
 * (":memory:"), with time driven by TestClock. Expected values are the numbers stated there.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Ref } from "effect"
import { backends, describeSkipped } from "../support/backends.js"
import type { Backend } from "../support/backends.js"
import { at } from "../support/world.js"
import type { World } from "../support/world.js"

const enqueueAll = (w: World, events: ReadonlyArray<readonly [id: string, flow: string, delta: number]>) =>
  Effect.forEach(events, ([eventId, flowId, delta]) => w.queue.enqueue({ eventId, flowId, body: { delta } }), { discard: true })

const steps = (w: World, n: number) =>
  Effect.map(Effect.replicateEffect(w.step, n), (results) => results.map((r) => r?.eventId ?? "idle"))

const eventOf = (w: World, eventId: string) =>
  Effect.map(w.queue.snapshot, (s) => s.events.find((e) => e.eventId === eventId)!)


const suite = (backend: Backend) => {
  describe("scenario 1: round_robin", () => {
    it.scoped("three flows of three events dispatch A1 B1 C1 A2 B2 C2 A3 B3 C3", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        yield* enqueueAll(w, ["A", "B", "C"].flatMap((f) => [1, 2, 3].map((i) => [`${f}${i}`, f, i] as const)))
        expect(yield* steps(w, 9)).toEqual(["A1", "B1", "C1", "A2", "B2", "C2", "A3", "B3", "C3"])
        expect(yield* w.queue.claim).toEqual({ _tag: "Idle" })
        const snapshot = yield* w.queue.snapshot
        expect(snapshot.clock.ticket).toBe(9)
        expect(snapshot.events.every((e) => e.state === "acked")).toBe(true)
      }))
  })

  describe("scenario 2: first_unacked_starvation", () => {
    it.scoped("the fair relay reaches B1 on step 2 while a naive first-unacked relay keeps picking A1", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        // The receiver already holds a receipt for id A1 with another body: a permanent id conflict.
        expect(yield* w.inbox.receive({ eventId: "A1", flowId: "Z", seq: 1, body: { delta: 99 } })).toEqual({ _tag: "Accepted" })
        yield* enqueueAll(w, [["A1", "A", 1], ["B1", "B", 1]])

        // Naive contrast: always take the first unacked event in enqueue order, retry on failure.
        const naive: Array<string> = []
        for (let i = 0; i < 5; i++) {
          const first = (yield* w.queue.snapshot).events.find((e) => e.state !== "acked")!
          naive.push(first.eventId)
          const reply = yield* w.inbox.receive({ eventId: first.eventId, flowId: first.flowId, seq: first.seq, body: first.body })
          expect(reply).toEqual({ _tag: "IdConflict" })
        }
        expect(naive).toEqual(["A1", "A1", "A1", "A1", "A1"])

        const first = yield* w.step
        expect(first).toMatchObject({ eventId: "A1", reply: { _tag: "IdConflict" }, outcome: { _tag: "Quarantined", reason: "id_conflict" } })
        const second = yield* w.step
        expect(second).toMatchObject({ eventId: "B1", reply: { _tag: "Accepted" }, outcome: { _tag: "Acked" } })
      }))
  })

  describe("scenario 4: retry_backoff", () => {
    it.scoped("A1 retries at ticks 0, 2, 6 and is quarantined on the third failure while B1 goes at tick 0", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        yield* enqueueAll(w, [["A1", "A", 1], ["B1", "B", 1]])
        const unavailable = { _tag: "Retry", reason: "unavailable" } as const

        const a1 = yield* w.claim
        expect(a1.event.eventId).toBe("A1")
        expect(yield* w.queue.settle(a1.token, unavailable)).toEqual({ _tag: "RetryScheduled", nextAt: 2 })
        expect(yield* w.step).toMatchObject({ eventId: "B1", outcome: { _tag: "Acked" } })

        yield* at(1)
        // Idle, and it says when A1's backoff ends.
        expect(yield* w.queue.claim).toEqual({ _tag: "Idle", wakeAt: 2 })

        yield* at(2)
        const second = yield* w.claim
        expect(second.event).toMatchObject({ eventId: "A1", attempts: 2 })
        expect(yield* w.queue.settle(second.token, unavailable)).toEqual({ _tag: "RetryScheduled", nextAt: 6 })

        yield* at(5)
        expect(yield* w.queue.claim).toEqual({ _tag: "Idle", wakeAt: 6 })

        yield* at(6)
        const third = yield* w.claim
        expect(third.event).toMatchObject({ eventId: "A1", attempts: 3 })
        expect(yield* w.queue.settle(third.token, unavailable)).toEqual({ _tag: "Quarantined", reason: "unavailable" })
        expect(yield* eventOf(w, "A1")).toMatchObject({ state: "quarantined", attempts: 3, lifetimeAttempts: 3 })
      }))
  })

  describe("scenario 5: stale_after_reclaim", () => {
    it.scoped("two sends, one effect, and only the newer claim's settle counts", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        yield* enqueueAll(w, [["A1", "A", 4]])
        const old = yield* w.claim
        expect(old.token.generation).toBe(1)
        yield* at(5)
        const fresh = yield* w.claim
        expect(fresh.token).toEqual({ eventId: "A1", generation: 2 })

        expect(yield* w.deliver(old)).toEqual({ _tag: "Accepted" })
        expect(yield* w.queue.settle(old.token, { _tag: "Accepted" })).toEqual({ _tag: "Stale" })
        expect(yield* w.deliver(fresh)).toEqual({ _tag: "Duplicate" })
        expect(yield* w.queue.settle(fresh.token, { _tag: "Duplicate" })).toEqual({ _tag: "Acked" })

        expect(yield* w.inbox.receipts).toHaveLength(1)
        expect(yield* w.totals).toEqual(new Map([["A", 4]]))
        expect(yield* eventOf(w, "A1")).toMatchObject({ state: "acked", generation: 2, attempts: 2 })
      }))
  })

  describe("scenario 6: expired_lease", () => {
    it.scoped("a settle at the end of the lease is Expired and changes nothing", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        yield* enqueueAll(w, [["A1", "A", 1]])
        const claimed = yield* w.claim
        expect(claimed.leaseUntil).toBe(5)
        const before = yield* eventOf(w, "A1")
        yield* at(5)
        expect(yield* w.queue.settle(claimed.token, { _tag: "Accepted" })).toEqual({ _tag: "Expired" })
        expect(yield* eventOf(w, "A1")).toEqual(before)
      }))
  })

  describe("scenario 7: quarantine_isolates_flow", () => {
    it.scoped("a quarantined head blocks only its own flow", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        yield* w.inbox.receive({ eventId: "A1", flowId: "Z", seq: 1, body: { delta: 5 } })
        yield* enqueueAll(w, [["A1", "A", 1], ["A2", "A", 2], ["B1", "B", 3]])
        expect(yield* steps(w, 4)).toEqual(["A1", "B1", "idle", "idle"])
        yield* at(100)
        expect(yield* w.queue.claim).toEqual({ _tag: "Idle" })
        const snapshot = yield* w.queue.snapshot
        expect(snapshot.events.map((e) => [e.eventId, e.state])).toEqual([
          ["A1", "quarantined"],
          ["A2", "ready"],
          ["B1", "acked"]
        ])
        expect(snapshot.events.find((e) => e.eventId === "A2")!.attempts).toBe(0)
        // A's head stays its quarantined seq 1 and is never eligible (A2 is not its head); B has none left.
        expect(snapshot.flows.map((f) => [f.flowId, f.headSeq, f.eligibleAt])).toEqual([
          ["A", 1, null],
          ["B", null, null]
        ])
      }))
  })

  describe("scenario 8: redrive_after_fix", () => {
    it.scoped("after the receiver limit is raised, a redrive completes A1 then A2 with total 11", () =>
      Effect.gen(function*() {
        const w = yield* backend.world({ maxDelta: 5 })
        yield* enqueueAll(w, [["A1", "A", 10], ["A2", "A", 1], ["B1", "B", 2]])
        const first = yield* w.step
        expect(first).toMatchObject({
          eventId: "A1",
          reply: { _tag: "Rejected", code: "unsupported_delta" },
          outcome: { _tag: "Quarantined", reason: "unsupported_delta" }
        })
        expect(yield* steps(w, 2)).toEqual(["B1", "idle"])
        const a1 = yield* eventOf(w, "A1")
        expect(a1).toMatchObject({ state: "quarantined", generation: 1 })

        yield* Ref.set(w.maxDelta, 1000)
        expect(yield* w.queue.redrive({ eventId: "A1", expectedGeneration: 1, reason: "receiver limit raised" }))
          .toEqual({ _tag: "Redriven", generation: 2 })
        expect(yield* steps(w, 3)).toEqual(["A1", "A2", "idle"])

        expect((yield* w.inbox.progress).get("A")).toBe(2)
        expect((yield* w.totals).get("A")).toBe(11)
        const snapshot = yield* w.queue.snapshot
        expect(snapshot.audit).toEqual([{ eventId: "A1", reason: "receiver limit raised", generation: 2, tick: 0, actor: null, action: "redrive", target: null }])
        expect(snapshot.events.find((e) => e.eventId === "A1")).toMatchObject({ state: "acked", lifetimeAttempts: 2, body: { delta: 10 }, seq: 1 })
      }))
  })

  describe("scenario 12: new_flows_overtake", () => {
    it.scoped("under the seed admission, flows enqueued after A1 all go before A2", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        yield* enqueueAll(w, [["A1", "A", 1], ["A2", "A", 2]])
        const order = [(yield* w.step)!.eventId]
        for (const flow of ["B", "C", "D"]) {
          yield* w.queue.enqueue({ eventId: `${flow}1`, flowId: flow, body: { delta: 1 } })
          order.push((yield* w.step)!.eventId)
        }
        order.push((yield* w.step)!.eventId)
        expect(order).toEqual(["A1", "B1", "C1", "D1", "A2"])
      }))
  })

  describe("served advances at claim time", () => {
    it.scoped("a permanently failing head rotates behind the others", () =>
      Effect.gen(function*() {
        // No backoff, a large budget: A1 is eligible again at once after each failure.
        const w = yield* backend.world({ policy: { backoffBase: 0, retryBudget: 100 } })
        yield* enqueueAll(w, [["A1", "A", 1], ["B1", "B", 1], ["B2", "B", 1], ["C1", "C", 1], ["C2", "C", 1]])
        const order: Array<string> = []
        for (let i = 0; i < 7; i++) {
          const claimed = yield* w.claim
          order.push(claimed.event.eventId)
          const reply = claimed.event.flowId === "A" ? { _tag: "Retry", reason: "unavailable" } as const : yield* w.deliver(claimed)
          yield* w.queue.settle(claimed.token, reply)
        }
        expect(order).toEqual(["A1", "B1", "C1", "A1", "B2", "C2", "A1"])
        const served = new Map((yield* w.queue.snapshot).flows.map((f) => [f.flowId, f.served]))
        expect(served).toEqual(new Map([["A", 7], ["B", 5], ["C", 6]]))
      }))

    it.scoped("a claim that is never settled still uses the flow's turn", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        yield* enqueueAll(w, [["A1", "A", 1], ["B1", "B", 1]])
        expect((yield* w.claim).event.eventId).toBe("A1")
        expect((yield* w.claim).event.eventId).toBe("B1")
        yield* at(5)
        // Both leases expired at 5: A was served first, so A goes first again.
        expect((yield* w.claim).event.eventId).toBe("A1")
        expect((yield* eventOf(w, "A1")).attempts).toBe(2)
      }))
  })

}

for (const backend of backends) describe(backend.name, () => suite(backend))
describeSkipped(suite)
