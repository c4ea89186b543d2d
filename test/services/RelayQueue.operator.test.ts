/**
 * Operating through an incident, on every backend: the last Retry reason kept on the event,
 * discarding a quarantined head (audited, never delivered, its flow moves on), and the guards
 * that refuse a discard without changing anything.
 */
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, TestClock } from "effect"
import { backends, describeSkipped } from "../support/backends.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import type { RelayQueueService } from "../../src/services/RelayQueue.js"
import { Inbox } from "../../src/services/Inbox.js"
import type { InboxService } from "../../src/services/Inbox.js"
import * as Relay from "../../src/services/Relay.js"
import { Transport } from "../../src/services/Transport.js"
import type { Backend } from "../support/backends.js"

const day = Duration.toMillis(Duration.days(1))

/** Claims and acks every head the queue hands out, in claim order (the queue's side alone). */
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

    /** A1 acked, then A2 (its delta over the receiver's limit) quarantined by the sample counter's refusal. */
    const quarantinedA2 = (more: ReadonlyArray<{ readonly eventId: string; readonly delta: number }>) =>
      Effect.gen(function*() {
        const w = yield* backend.world({ maxDelta: 5 })
        yield* w.queue.enqueueBatch([
          { eventId: "A1", flowId: "A", body: { delta: 1 } },
          { eventId: "A2", flowId: "A", body: { delta: 10 } },
          ...more.map(({ delta, eventId }) => ({ eventId, flowId: "A", body: { delta } }))
        ])
        expect(yield* w.step).toMatchObject({ eventId: "A1", reply: { _tag: "Accepted" }, outcome: { _tag: "Acked" } })
        expect(yield* w.step).toMatchObject({ eventId: "A2", outcome: { _tag: "Quarantined" } })
        return w
      })

    /** A relay worker over the world's queue, delivering in process to its inbox (`Transport.layerInbox`). */
    const relayOf = (w: { readonly queue: RelayQueueService; readonly inbox: InboxService }) =>
      Relay.make.pipe(
        Effect.provide(Transport.layerInbox),
        Effect.provideService(RelayQueue, w.queue),
        Effect.provideService(Inbox, w.inbox)
      )

    it.scoped("the event after a discarded head carries the seq before it, and fair-relay's receiver accepts it; the flow drains", () =>
      Effect.gen(function*() {
        const w = yield* quarantinedA2([{ eventId: "A3", delta: 2 }, { eventId: "A4", delta: 3 }])
        yield* w.queue.discard({ eventId: "A2", expectedGeneration: 1, reason: "poison" })
        const relay = yield* relayOf(w)
        const a3 = yield* relay.step
        expect(a3).toMatchObject({ _tag: "Delivered", claimed: { event: { eventId: "A3" }, previousSeq: 1 }, reply: { _tag: "Accepted" }, outcome: { _tag: "Acked" } })
        // The event after it follows an acked one: nothing skipped, no previousSeq.
        const a4 = yield* relay.step
        expect(a4).toMatchObject({ _tag: "Delivered", claimed: { event: { eventId: "A4" } }, reply: { _tag: "Accepted" } })
        expect(a4._tag === "Delivered" && "previousSeq" in a4.claimed).toBe(false)
        expect(yield* relay.step).toMatchObject({ _tag: "Idle" })
        expect((yield* w.inbox.receipts).map((r) => r.eventId)).toEqual(["A1", "A3", "A4"])
        expect(yield* w.inbox.progress).toEqual(new Map([["A", 4]]))
        expect(yield* w.totals).toEqual(new Map([["A", 6]]))
        expect((yield* w.queue.stats).byState).toMatchObject({ acked: 3, discarded: 1, quarantined: 0, ready: 0, inflight: 0 })
      }))

    it.scoped("discards in a row chain: discarding A2 then A3 makes A4 carry A1's seq, and it is accepted", () =>
      Effect.gen(function*() {
        const w = yield* quarantinedA2([{ eventId: "A3", delta: 20 }, { eventId: "A4", delta: 3 }])
        yield* w.queue.discard({ eventId: "A2", expectedGeneration: 1, reason: "poison" })
        // A3 passes the receiver's order check (previousSeq 1), and its delta is refused in turn.
        expect(yield* w.step).toMatchObject({ eventId: "A3", reply: { _tag: "Rejected" }, outcome: { _tag: "Quarantined" } })
        yield* w.queue.discard({ eventId: "A3", expectedGeneration: 1, reason: "poison too" })
        const a4 = yield* w.claim
        expect(a4).toMatchObject({ event: { eventId: "A4", seq: 4 }, previousSeq: 1 })
        const reply = yield* w.deliver(a4)
        expect(reply).toEqual({ _tag: "Accepted" })
        expect(yield* w.queue.settle(a4.token, reply)).toEqual({ _tag: "Acked" })
        expect(yield* w.step).toBeNull()
        expect(yield* w.inbox.progress).toEqual(new Map([["A", 4]]))
        expect(yield* w.totals).toEqual(new Map([["A", 4]]))
      }))

    it.scoped("a flow's last event discarded: the event enqueued after it carries the seq before it and is accepted", () =>
      Effect.gen(function*() {
        const w = yield* quarantinedA2([])
        expect(yield* w.queue.discard({ eventId: "A2", expectedGeneration: 1, reason: "poison" })).toMatchObject({ nextHead: null })
        yield* w.queue.enqueue({ eventId: "A3", flowId: "A", body: { delta: 2 } })
        const relay = yield* relayOf(w)
        expect(yield* relay.step).toMatchObject({ claimed: { event: { eventId: "A3" }, previousSeq: 1 }, reply: { _tag: "Accepted" }, outcome: { _tag: "Acked" } })
        expect(yield* w.inbox.progress).toEqual(new Map([["A", 3]]))
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
describeSkipped(suite)

const pauseSuite = (backend: Backend) => {
  const idleUntil = (w: { readonly queue: RelayQueueService }) =>
    Effect.map(w.queue.claimUpTo(1), (batch) => {
      expect(batch.claims).toEqual([])
      return batch.wakeAt
    })

  describe("pause and resume", () => {
    it.scoped("a paused flow's head is not claimed, an in-flight one settles, and on resume it is first: it kept its turn", () =>
      Effect.gen(function*() {
        const w = yield* backend.world({ policy: { admission: "tail" } })
        yield* w.queue.enqueueBatch(["A", "B", "C"].flatMap((f) => [1, 2].map((i) => ({ eventId: `${f}${i}`, flowId: f, body: { delta: 1 } }))))
        const a1 = yield* w.claim
        expect(a1.event.eventId).toBe("A1")
        expect(yield* w.queue.pause({ flowId: "A", reason: "receiver A down", actor: "ops" }))
          .toEqual({ _tag: "Paused", target: { kind: "flow", id: "A" }, changed: true })
        // In flight when paused: it settles as usual.
        expect(yield* w.queue.settle(a1.token, { _tag: "Accepted" })).toEqual({ _tag: "Acked" })
        const servedA = (yield* w.queue.flows()).find((f) => f.flowId === "A")!
        expect(servedA.paused).toBe(true)
        expect(yield* drain(w)).toEqual(["B1", "C1", "B2", "C2"])
        // Only a paused head is left: idle, and no wake-up before something changes.
        const wakeAt = yield* idleUntil(w)
        expect(wakeAt === undefined || wakeAt > 0).toBe(true)
        expect((yield* w.queue.stats)).toMatchObject({ eligibleHeads: 0, paused: { flows: 1, groups: 0 } })
        expect((yield* w.queue.flows()).find((f) => f.flowId === "A")).toMatchObject({ served: servedA.served, paused: true })
        yield* w.queue.enqueueBatch([{ eventId: "B3", flowId: "B", body: { delta: 1 } }, { eventId: "C3", flowId: "C", body: { delta: 1 } }])
        expect(yield* w.queue.resume({ flowId: "A", reason: "receiver A back", actor: "ops" })).toMatchObject({ _tag: "Resumed", changed: true })
        // A kept the turn it had (served before B's and C's latest): it goes first.
        expect(yield* drain(w)).toEqual(["A2", "B3", "C3"])
        const audit = (yield* w.queue.snapshot).audit
        expect(audit.map((a) => [a.action, a.target, a.eventId, a.actor, a.reason])).toEqual([
          ["pause", "flow:A", null, "ops", "receiver A down"],
          ["resume", "flow:A", null, "ops", "receiver A back"]
        ])
      }))

    it.scoped("a paused group's flows get no claim; the other groups and flows of no group go on; resumed, it is claimed again", () =>
      Effect.gen(function*() {
        const w = yield* backend.world({ policy: { admission: "tail" } })
        const events = [
          ...[1, 2, 3].flatMap((i) => ["a1", "a2"].map((f) => ({ eventId: `${f}-${i}`, flowId: f, group: "A", body: { delta: 1 } }))),
          ...[1, 2, 3].map((i) => ({ eventId: `b-${i}`, flowId: "b", group: "B", body: { delta: 1 } })),
          ...[1, 2].map((i) => ({ eventId: `x-${i}`, flowId: "x", body: { delta: 1 } }))
        ]
        yield* w.queue.enqueueBatch(events)
        yield* w.queue.pause({ group: "A", reason: "tenant A's endpoint is down" })
        expect((yield* w.queue.groups()).map((g) => [g.groupId, g.paused])).toEqual([["A", true], ["B", false]])
        expect(yield* drain(w)).toEqual(["b-1", "x-1", "b-2", "x-2", "b-3"])
        expect(yield* idleUntil(w)).toBeUndefined()
        expect((yield* w.queue.stats).paused).toEqual({ flows: 0, groups: 1 })
        // Batches pass over it too.
        expect(yield* w.queue.claimBatch(10)).toEqual([])
        yield* w.queue.resume({ group: "A", reason: "back" })
        expect((yield* drain(w)).sort()).toEqual(["a1-1", "a1-2", "a1-3", "a2-1", "a2-2", "a2-3"])
      }))

    it.scoped("pausing one flow of a group leaves its siblings claimable", () =>
      Effect.gen(function*() {
        const w = yield* backend.world({ policy: { admission: "tail" } })
        yield* w.queue.enqueueBatch([1, 2].flatMap((i) => ["g1", "g2"].map((f) => ({ eventId: `${f}-${i}`, flowId: f, group: "G", body: { delta: 1 } }))))
        yield* w.queue.pause({ flowId: "g1", reason: "one bad flow" })
        expect(yield* drain(w)).toEqual(["g2-1", "g2-2"])
        expect(yield* idleUntil(w)).toBeUndefined()
        yield* w.queue.resume({ flowId: "g1", reason: "fixed" })
        expect(yield* drain(w)).toEqual(["g1-1", "g1-2"])
      }))

    it.scoped("an unknown flow or group is TargetNotFound, a blank reason InvalidInput; neither changes anything", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        const before = yield* w.queue.snapshot
        expect(yield* Effect.flip(w.queue.pause({ flowId: "nope", reason: "x" }))).toMatchObject({ _tag: "TargetNotFound", kind: "flow", id: "nope" })
        expect(yield* Effect.flip(w.queue.resume({ group: "nope", reason: "x" }))).toMatchObject({ _tag: "TargetNotFound", kind: "group" })
        expect(yield* Effect.flip(w.queue.pause({ flowId: "A", reason: "  " }))).toMatchObject({ _tag: "InvalidInput" })
        expect(yield* w.queue.snapshot).toEqual(before)
        // Pausing twice changes nothing the second time (but is recorded: an operator acted).
        yield* w.queue.pause({ flowId: "A", reason: "x" })
        expect(yield* w.queue.pause({ flowId: "A", reason: "x" })).toMatchObject({ changed: false })
      }))

    it.scoped("an idle claim's wake-up time passes over a paused flow's head waiting out its backoff", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        yield* w.queue.enqueue({ eventId: "B1", flowId: "B", body: { delta: 1 } })
        const claimed = yield* w.claim
        const retry = yield* w.queue.settle(claimed.token, { _tag: "Retry", reason: "unavailable" })
        expect(retry).toMatchObject({ _tag: "RetryScheduled" })
        expect(yield* w.queue.claim).toEqual({ _tag: "Idle", wakeAt: (retry as { readonly nextAt: number }).nextAt })
        yield* w.queue.pause({ flowId: "B", reason: "receiver B down" })
        // Nothing but the paused head: no time to wake at (resume wakes the workers).
        expect(yield* w.queue.claim).toEqual({ _tag: "Idle" })
        expect(yield* w.queue.claimUpTo(5)).toEqual({ claims: [] })
      }))

    it.scoped("a pause or resume is a write: the store's tick reaches the tick its audit row records, changed or not", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        for (const act of [
          w.queue.pause({ flowId: "A", reason: "receiver down" }),
          w.queue.pause({ flowId: "A", reason: "still down" }),
          w.queue.resume({ flowId: "A", reason: "receiver back" })
        ]) {
          yield* TestClock.adjust("1 minute")
          yield* act
          const { audit, clock } = yield* w.queue.snapshot
          expect(audit[audit.length - 1]!.tick).toBe(clock.tick)
        }
      }))
  })
}

for (const backend of backends) describe(backend.name, () => pauseSuite(backend))
describeSkipped(pauseSuite)

/**
 * `flows` flows in each of `groups` groups (`g<i>`, flows `g<i>-f<j>`), each with `events` events;
 * every flow's first event quarantined, with reason `bad-<i>` (the group's index).
 */
export const quarantineAcross = (queue: RelayQueueService, groups: number, flows: number, events = 2) =>
  Effect.gen(function*() {
    const inputs = []
    for (let g = 0; g < groups; g++) {
      for (let f = 0; f < flows; f++) {
        for (let e = 1; e <= events; e++) inputs.push({ eventId: `g${g}-f${f}-${e}`, flowId: `g${g}-f${f}`, group: `g${g}`, body: { e } })
      }
    }
    yield* queue.enqueueBatch(inputs)
    for (;;) {
      const claims = yield* queue.claimBatch(500)
      if (claims.length === 0) break
      yield* queue.settleBatch(claims.map((c) => ({ token: c.token, reply: { _tag: "Rejected" as const, code: `bad-${c.event.flowId.split("-")[0]!.slice(1)}` } })))
    }
  })

const bulkSuite = (backend: Backend) => {
  describe("bulk redrive", () => {
    it.scoped("redrives every quarantined head of a group in pages, one audit row each; a dry run writes nothing; a second run finds none", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        yield* quarantineAcross(w.queue, 3, 7)
        const before = yield* w.queue.snapshot
        const dry = yield* w.queue.redriveAll({ filter: { group: "g1" }, reason: "receiver fixed", dryRun: true, pageSize: 3 })
        expect(dry).toMatchObject({ dryRun: true, skipped: 0, pages: 3 })
        expect(dry.heads.map((h) => h.eventId)).toEqual(Array.from({ length: 7 }, (_, f) => `g1-f${f}-1`))
        expect(dry.heads[0]).toEqual({ eventId: "g1-f0-1", flowId: "g1-f0", group: "g1", reason: "bad-1", generation: 1 })
        expect(yield* w.queue.snapshot).toEqual(before)

        const pages: Array<number> = []
        const done = yield* w.queue.redriveAll({
          filter: { group: "g1" },
          reason: "receiver fixed",
          actor: "ops",
          pageSize: 3,
          onPage: (page) => Effect.sync(() => void pages.push(page.length))
        })
        expect(pages).toEqual([3, 3, 1])
        expect(done).toMatchObject({ dryRun: false, skipped: 0, pages: 3 })
        expect(done.heads.map((h) => [h.eventId, h.generation])).toEqual(Array.from({ length: 7 }, (_, f) => [`g1-f${f}-1`, 2]))
        const audit = (yield* w.queue.snapshot).audit
        expect(audit.map((a) => a.eventId)).toEqual(done.heads.map((h) => h.eventId))
        expect(audit.every((a) => a.action === "redrive" && a.reason === "receiver fixed" && a.actor === "ops" && a.target?.startsWith("bulk:"))).toBe(true)
        expect(yield* w.queue.redriveAll({ filter: { group: "g1" }, reason: "again" })).toMatchObject({ heads: [], pages: 0 })
        // Only g1's heads are claimable now, each flow in order.
        const order = yield* drain(w)
        expect(order.every((id) => id.startsWith("g1-"))).toBe(true)
        for (let f = 0; f < 7; f++) expect(order.filter((id) => id.startsWith(`g1-f${f}-`))).toEqual([`g1-f${f}-1`, `g1-f${f}-2`])
      }))

    it.scoped("filters by flow, flow prefix, reason text and quarantine time; no filter is InvalidInput", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        yield* quarantineAcross(w.queue, 3, 3)
        const ids = (filter: Parameters<typeof w.queue.redriveAll>[0]["filter"]) =>
          Effect.map(w.queue.redriveAll({ filter, reason: "x", dryRun: true }), (r) => r.heads.map((h) => h.eventId))
        expect(yield* ids({ flowId: "g2-f1" })).toEqual(["g2-f1-1"])
        expect(yield* ids({ flowPrefix: "g0-" })).toEqual(["g0-f0-1", "g0-f1-1", "g0-f2-1"])
        expect(yield* ids({ reasonContains: "bad-2" })).toEqual(["g2-f0-1", "g2-f1-1", "g2-f2-1"])
        expect(yield* ids({ reasonContains: "nothing like it" })).toEqual([])
        const now = yield* Effect.clockWith((c) => c.currentTimeMillis)
        expect((yield* ids({ quarantinedBefore: now })).length).toBe(9)
        expect(yield* ids({ quarantinedAfter: now + 1 })).toEqual([])
        expect(yield* ids({ group: "g0", flowPrefix: "g1" })).toEqual([])
        expect(yield* Effect.flip(w.queue.redriveAll({ filter: {}, reason: "x" }))).toMatchObject({ _tag: "InvalidInput" })
        expect(yield* Effect.flip(w.queue.redriveAll({ filter: { all: true }, reason: " " }))).toMatchObject({ _tag: "InvalidInput" })
        expect((yield* w.queue.redriveAll({ filter: { all: true }, reason: "everything" })).heads.length).toBe(9)
      }))
  })
}

for (const backend of backends) describe(backend.name, () => bulkSuite(backend))
describeSkipped(bulkSuite)
