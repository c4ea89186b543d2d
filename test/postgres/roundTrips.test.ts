/**
 * The round trips of a single-step claim and settle on PostgreSQL, and what each carries (BEGIN
 * and the store's lock lead the first, COMMIT ends the last): a settle's event read goes with the
 * clock read, the writes nobody reads go with the next statement whose answer is needed — a
 * settle's writes with the claim's walk in `settleAndClaim` — and the last ones with COMMIT. With
 * exact claims (the store's lock), `settleAndClaim`'s walk goes with the settle's read, before
 * the settle's writes (`Operations.candidatesAfterSettle`): the settle's and the claim's writes
 * then go together with COMMIT; a claim alone sends its walk with the clock read. With parallel
 * claims, the tickets of a claim's turns are drawn by a statement held for its writes, in front
 * of them (the writes take them in SQL). The bench's figures (exact: 2 round trips per claim, 2
 * per settle, 2 per `settleAndClaim`; parallel: 3, 2 and 3) rest on these shapes. An inbox receive
 * sends its receipt read with its progress read (its business's own statements go on their own),
 * and its writes with COMMIT; an inbox prune batch makes two: its read, then its writes with COMMIT.
 */
import { it } from "@effect/vitest"
import { Effect, Ref } from "effect"
import { expect } from "vitest"
import { Counter, PgInbox, PgRelayQueue } from "../../src/index.js"
import { StatementLog } from "../../src/layers/internal/Store.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

/** Runs `effect` and returns its result with the round trips it made, each the statements it carried (whitespace folded). */
const captureTrips = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const trips: Array<ReadonlyArray<string>> = []
    const result = yield* Effect.provideService(effect, StatementLog, {
      record: undefined,
      roundTrip: (texts) => trips.push(texts.map((text) => text.replace(/\s+/g, " ").trim()))
    })
    return [result, trips] as const
  })

/** The index of the first statement of `trip` matching `pattern` (-1: none). */
const at = (trip: ReadonlyArray<string> | undefined, pattern: RegExp) => (trip ?? []).findIndex((text) => pattern.test(text))

const clockRead = { exact: /^SELECT tick, ticket FROM relay_clock/, parallel: /^SELECT c\.tick, s\.last_value AS ticket FROM relay_clock/ }
const eventRead = { exact: /UNION ALL SELECT 1 AS next/, parallel: /^SELECT e\.\* FROM relay_event e JOIN relay_flow f .* FOR UPDATE OF f, e$/ }
const walk = /^(WITH alone AS \()?SELECT f\.flow_id, f\.seq/
const claimRead = /^SELECT w\.\*, d\.due_after FROM/
const groupRefresh = /^UPDATE relay_group SET eligible_at/
const draw = /^SELECT set_config\('fair_relay\.turns'.*nextval\('relay_ticket'\)/

describePg("PostgreSQL: round trips of a claim and a settle", (url) => {
  for (const claims of ["exact", "parallel"] as const) {
    it.scopedLive(`${claims} claims`, () =>
      Effect.gen(function*() {
        const schema = yield* freshSchema(url)
        const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, claims })
        yield* queue.enqueueBatch([{ eventId: "A1", flowId: "A", body: {} }, { eventId: "A2", flowId: "A", body: {} }])
        const [claimed, claimTrips] = yield* captureTrips(queue.claim)
        if (claimed._tag !== "Claimed") return yield* Effect.dieMessage("expected a claim")
        const [outcome, settleTrips] = yield* captureTrips(queue.settle(claimed.token, { _tag: "Accepted" }))
        expect(outcome._tag).toBe("Acked")
        // A2 is the flow's head now: the settle found it.
        expect((yield* queue.snapshot).flows.find((f) => f.flowId === "A")?.headSeq).toBe(2)

        // The claim: BEGIN … clock read (exact: the walk with it); (parallel: the walk;) its writes
        // with COMMIT (parallel: the draw of its ticket in front of the flow's write).
        expect(claimTrips).toHaveLength(claims === "exact" ? 2 : 3)
        expect(claimTrips[0]![0]).toBe("BEGIN")
        expect(at(claimTrips[0], clockRead[claims])).toBe(claimTrips[0]!.length - 1)
        if (claims === "exact") {
          expect(at(claimTrips[0], claimRead)).toBe(claimTrips[0]!.length - 2)
          expect(claimTrips[0]![claimTrips[0]!.length - 2]).not.toMatch(/UNION ALL SELECT 1 AS settled/)
        } else {
          expect(claimTrips[1]).toHaveLength(1)
          expect(claimTrips[1]![0]).toMatch(walk)
        }
        const claimLast = claimTrips[claimTrips.length - 1]!
        expect(claimLast[claimLast.length - 1]).toBe("COMMIT")
        expect(at(claimLast, /^UPDATE relay_event SET state/)).toBeGreaterThanOrEqual(0)
        expect(at(claimLast, /^INSERT INTO relay_flow/)).toBeGreaterThanOrEqual(0)
        expect(claimTrips.flat().filter((text) => draw.test(text))).toHaveLength(claims === "exact" ? 0 : 1)
        if (claims === "parallel") expect(at(claimLast, draw)).toBeLessThan(at(claimLast, /^INSERT INTO relay_flow/))

        // The settle: BEGIN … its event read (parallel: locking the rows, then the next event in a
        // statement of its own, after the locks) and the clock read after it; its writes with COMMIT.
        expect(settleTrips).toHaveLength(2)
        expect(settleTrips[0]![0]).toBe("BEGIN")
        const eventAt = at(settleTrips[0], eventRead[claims])
        expect(eventAt).toBeGreaterThan(0)
        if (claims === "parallel") expect(settleTrips[0]![eventAt + 1]).toMatch(/^SELECT n\.\* FROM relay_event e JOIN relay_event n/)
        expect(at(settleTrips[0], clockRead[claims])).toBe(eventAt + (claims === "exact" ? 1 : 2))
        const settleLast = settleTrips[settleTrips.length - 1]!
        expect(settleLast[settleLast.length - 1]).toBe("COMMIT")
        expect(at(settleLast, /^UPDATE relay_event SET state/)).toBeLessThan(at(settleLast, /^UPDATE relay_flow SET head_seq/))
      }))

    it.scopedLive(`${claims} claims: settleAndClaim is one transaction: one clock read, one clock write, the settle's writes go with the walk, and the claim sees the ack`, () =>
      Effect.gen(function*() {
        const schema = yield* freshSchema(url)
        const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, claims })
        yield* queue.enqueueBatch([1, 2, 3].map((i) => ({ eventId: `A${i}`, flowId: "A", body: {} })))
        const { claims: [first] } = yield* queue.claimUpTo(1)
        if (first === undefined) return yield* Effect.dieMessage("expected a claim")
        const [result, trips] = yield* captureTrips(queue.settleAndClaim([{ token: first.token, reply: { _tag: "Accepted" } }], 1))
        // A1 acked, and the claim in the same transaction found A2, which only that ack made the head.
        expect(result.outcomes).toEqual([{ _tag: "Acked" }])
        expect(result.claims.map((c) => c.event.eventId)).toEqual(["A2"])
        expect(trips).toHaveLength(claims === "exact" ? 2 : 3)
        expect(trips.flat().filter((text) => clockRead[claims].test(text))).toHaveLength(1)
        // The clock row is written once, with the claim's writes (the settle's tick goes with them).
        const clockWrites = trips.map((trip) => trip.filter((text) => /^UPDATE relay_clock/.test(text)).length)
        expect(clockWrites).toEqual(trips.map((_, i) => (i === trips.length - 1 ? 1 : 0)))
        if (claims === "exact") {
          // The walk goes with the settle's read, before the clock read; the settle's writes and
          // the claim's go with COMMIT, the settle's first.
          const [first, last] = trips as [ReadonlyArray<string>, ReadonlyArray<string>]
          const walkRead = at(first, claimRead)
          expect(first[walkRead]).toMatch(/SELECT 0 AS settled, c\.\* FROM \(SELECT f\.flow_id, f\.seq/)
          expect(at(first, eventRead.exact)).toBeLessThan(walkRead)
          expect(walkRead).toBeLessThan(at(first, clockRead.exact))
          expect(trips.flat().filter((text) => walk.test(text))).toHaveLength(0)
          expect(at(last, /^UPDATE relay_flow SET head_seq/)).toBeLessThan(at(last, /^INSERT INTO relay_flow/))
          // That read found the settled flow in no group: no group's turn is refreshed.
          expect(trips.flat().filter((text) => groupRefresh.test(text))).toEqual([])
        } else {
          // The walk comes after the settle's writes, in their round trip; the ticket's draw with
          // the claim's writes, in front of them.
          const walking = trips.find((trip) => at(trip, walk) >= 0)!
          expect(at(walking, walk)).toBe(walking.length - 1)
          const last = trips[trips.length - 1]!
          expect(trips.flat().filter((text) => draw.test(text))).toHaveLength(1)
          expect(at(last, draw)).toBeGreaterThanOrEqual(0)
          expect(at(last, draw)).toBeLessThan(at(last, /^INSERT INTO relay_flow/))
          expect(at(walking, /^UPDATE relay_event SET state/)).toBeGreaterThanOrEqual(0)
          expect(at(walking, /^UPDATE relay_flow SET head_seq/)).toBeGreaterThanOrEqual(0)
          expect(at(walking, groupRefresh)).toBeGreaterThan(at(walking, /^UPDATE relay_flow SET head_seq/))
        }
        expect(trips[trips.length - 1]![trips[trips.length - 1]!.length - 1]).toBe("COMMIT")
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
      const [result, trips] = yield* captureTrips(queue.settleAndClaim([{ token: first!.token, reply: { _tag: "Accepted" } }], 1))
      expect(result.outcomes).toEqual([{ _tag: "Acked" }])
      expect(result.claims.map((c) => c.event.eventId)).toEqual(["B1"])
      // The settle's head write refreshes the groups of the flows it changed, found in SQL.
      expect(trips.flat().filter((text) => /^UPDATE relay_group SET eligible_at .* WHERE group_id IN \(SELECT group_id FROM relay_flow/.test(text)))
        .toHaveLength(1)
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
