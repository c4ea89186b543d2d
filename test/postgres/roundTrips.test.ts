/**
 * The round trips of the hot operations on PostgreSQL: an enqueue, a claim, a settle and a
 * settle-and-claim are each one call of a server function, sent alone (no BEGIN, no COMMIT: the
 * server commits the call as it returns), on both claim modes. An inbox receive sends its receipt
 * read with its progress read (its business's own statements go on their own), and its writes
 * with COMMIT; an inbox prune batch makes two: its read, then its writes with COMMIT.
 */
import { it } from "@effect/vitest"
import { Effect, Ref } from "effect"
import { expect } from "vitest"
import { Counter, PgInbox, PgRelayQueue } from "../../src/index.js"
import { StatementLog } from "../../src/layers/internal/Store.js"
import { captureSql } from "../../scenarios/support/captureSql.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

/** Runs `effect` and returns its result with the round trips of the store's own transactions, each the statements it carried (whitespace folded). */
const captureTrips = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const trips: Array<ReadonlyArray<string>> = []
    const result = yield* Effect.provideService(effect, StatementLog, {
      record: undefined,
      roundTrip: (texts) => trips.push(texts.map((text) => text.replace(/\s+/g, " ").trim()))
    })
    return [result, trips] as const
  })

/** `effect`'s result, and the statements it sent — each sent alone, outside any transaction of the store's. */
const sentAlone = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.map(captureTrips(captureSql(effect)), ([[result, statements], trips]) => {
    expect(trips).toEqual([])
    return [result, statements.map((text) => text.replace(/\s+/g, " ").trim())] as const
  })

/** The index of the first statement of `trip` matching `pattern` (-1: none). */
const at = (trip: ReadonlyArray<string> | undefined, pattern: RegExp) => (trip ?? []).findIndex((text) => pattern.test(text))

describePg("PostgreSQL: round trips of the hot operations", (url) => {
  for (const claims of ["exact", "parallel"] as const) {
    it.scopedLive(`${claims} claims: an enqueue, a claim, a settle and a settle-and-claim are one call each`, () =>
      Effect.gen(function*() {
        const schema = yield* freshSchema(url)
        const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, claims })
        const [enqueued, enqueueSent] = yield* sentAlone(queue.enqueueBatch([1, 2, 3].map((i) => ({ eventId: `A${i}`, flowId: "A", body: {} }))))
        expect(enqueued.map((r) => r._tag)).toEqual(["Enqueued", "Enqueued", "Enqueued"])
        expect(enqueueSent).toHaveLength(1)
        expect(enqueueSent[0]).toMatch(/^SELECT relay_enqueue\(/)
        const [claimed, claimSent] = yield* sentAlone(queue.claim)
        if (claimed._tag !== "Claimed") return yield* Effect.dieMessage("expected a claim")
        expect(claimSent).toHaveLength(1)
        expect(claimSent[0]).toMatch(/^SELECT relay_step\(/)
        const [outcome, settleSent] = yield* sentAlone(queue.settle(claimed.token, { _tag: "Accepted" }))
        expect(outcome._tag).toBe("Acked")
        expect(settleSent).toHaveLength(1)
        // A2 is the flow's head now: the settle found it.
        expect((yield* queue.snapshot).flows.find((f) => f.flowId === "A")?.headSeq).toBe(2)
        const { claims: [second] } = yield* queue.claimUpTo(1)
        const [result, exchangeSent] = yield* sentAlone(queue.settleAndClaim([{ token: second!.token, reply: { _tag: "Accepted" } }], 1))
        // A2 acked, and the claim in the same call found A3, which only that ack made the head.
        expect(result.outcomes).toEqual([{ _tag: "Acked" }])
        expect(result.claims.map((c) => c.event.eventId)).toEqual(["A3"])
        expect(exchangeSent).toHaveLength(1)
        expect(exchangeSent[0]).toMatch(/^SELECT relay_step\(/)
      }))
  }

  it.scopedLive("exact claims: a settleAndClaim that settles a flow of a group refreshes the group's turn: a group left with no head waits for nothing", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, claims: "exact" })
      yield* queue.enqueueBatch([
        { eventId: "A1", flowId: "A", body: {}, group: "G" },
        { eventId: "B1", flowId: "B", body: {} }
      ])
      const eligibleAt = (group: string) =>
        Effect.map(
          schema.admin<{ readonly eligible_at: unknown }>`SELECT eligible_at FROM ${schema.admin(schema.name)}.relay_group WHERE group_id = ${group}`,
          ([row]) => row?.eligible_at
        )
      expect(yield* eligibleAt("G")).not.toBeNull()
      const { claims: [first] } = yield* queue.claimUpTo(1)
      expect(first?.event.eventId).toBe("A1")
      const result = yield* queue.settleAndClaim([{ token: first!.token, reply: { _tag: "Accepted" } }], 1)
      expect(result.outcomes).toEqual([{ _tag: "Acked" }])
      expect(result.claims.map((c) => c.event.eventId)).toEqual(["B1"])
      // A, G's only flow, has no head left: G waits for nothing.
      expect(yield* eligibleAt("G")).toBeNull()
    }))

  it.scopedLive("an inbox receive: its receipt and progress reads in one round trip, its writes with COMMIT", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const inbox = yield* PgInbox.make({ url: schema.url, maxConnections: 1, business: Counter.business(yield* Ref.make(10)) })
      const receiptRead = /^SELECT event_id, flow_id, seq, body FROM inbox_receipt WHERE event_id IN/
      const progressRead = /^SELECT flow_id, last_seq, pruned_through FROM inbox_progress WHERE flow_id IN/
      const [reply, trips] = yield* captureTrips(inbox.receive({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 2 } }))
      expect(reply).toEqual({ _tag: "Accepted" })
      // The business's upsert runs through @effect/sql on the same transaction, between the two.
      expect(trips).toHaveLength(2)
      expect(trips[0]![0]).toBe("BEGIN")
      expect(at(trips[0], receiptRead)).toBe(trips[0]!.length - 2)
      expect(at(trips[0], progressRead)).toBe(trips[0]!.length - 1)
      expect(at(trips[1], /^INSERT INTO inbox_receipt/)).toBeGreaterThanOrEqual(0)
      expect(at(trips[1], /^INSERT INTO inbox_progress/)).toBeGreaterThan(at(trips[1], /^INSERT INTO inbox_receipt/))
      expect(trips[1]![trips[1]!.length - 1]).toBe("COMMIT")
      // The reads found what the receive wrote: the redelivery is a duplicate, the flow's next seq is accepted, one after the other.
      const [duplicate, duplicateTrips] = yield* captureTrips(inbox.receive({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 2 } }))
      expect(duplicate).toEqual({ _tag: "Duplicate" })
      expect(at(duplicateTrips[0], receiptRead)).toBe(duplicateTrips[0]!.length - 2)
      expect(duplicateTrips[duplicateTrips.length - 1]).toEqual(["COMMIT"])
      expect(yield* inbox.receive({ eventId: "A3", flowId: "A", seq: 3, body: { delta: 1 } })).toEqual({ _tag: "Gap", expected: 2 })
      expect(yield* inbox.receive({ eventId: "A2", flowId: "A", seq: 2, body: { delta: 1 } })).toEqual({ _tag: "Accepted" })
      expect([...(yield* inbox.progress)]).toEqual([["A", 2]])
    }))

  it.scopedLive("an inbox prune batch: its read, then its writes (progress marks, receipts deleted) with COMMIT", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const inbox = yield* PgInbox.make({ url: schema.url, maxConnections: 1, business: Counter.business(yield* Ref.make(10)), retention: { receipts: 0 } })
      for (const [eventId, flowId, seq] of [["A1", "A", 1], ["A2", "A", 2], ["B1", "B", 1]] as const) {
        expect(yield* inbox.receive({ eventId, flowId, seq, body: { delta: 1 } })).toEqual({ _tag: "Accepted" })
      }
      const [pruned, trips] = yield* captureTrips(inbox.prune())
      expect(pruned).toEqual({ receipts: 3, dryRun: false })
      expect(trips).toHaveLength(2)
      expect(trips[0]![0]).toBe("BEGIN")
      expect(at(trips[0], /^SELECT event_id, flow_id, seq FROM inbox_receipt/)).toBe(trips[0]!.length - 1)
      const [last] = trips.slice(-1)
      expect(at(last, /^UPDATE inbox_progress SET pruned_through/)).toBeGreaterThanOrEqual(0)
      expect(at(last, /^DELETE FROM inbox_receipt/)).toBeGreaterThan(at(last, /^UPDATE inbox_progress/))
      expect(last![last!.length - 1]).toBe("COMMIT")
      // What the prune wrote: no receipt left; a redelivery at or below each flow's pruned seq is a duplicate.
      expect(yield* inbox.receipts).toEqual([])
      expect(yield* inbox.receive({ eventId: "A2", flowId: "A", seq: 2, body: { delta: 1 } })).toEqual({ _tag: "Duplicate" })
    }))
})
