/**
 * The round trips of the hot operations on PostgreSQL: an enqueue, a claim, a settle and a
 * settle-and-claim are each one call of a server function, sent alone (no BEGIN, no COMMIT: the
 * server commits the call as it returns), on both claim modes.
 */
import { it } from "@effect/vitest"
import { Effect, Tracer } from "effect"
import { expect } from "vitest"
import { PgRelayQueue } from "../../src/index.js"
import { captureSql } from "../../scenarios/support/captureSql.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

/**
 * `effect`'s result, and the statements it sent through `@effect/sql` (its `sql.execute` spans);
 * none in a transaction (no `sql.transaction` span).
 */
const sentAlone = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const spans: Array<string> = []
    const native = yield* Effect.tracer
    const tracer = Tracer.make({
      span: (name, ...rest) => {
        spans.push(name)
        return native.span(name, ...rest)
      },
      context: (f, fiber) => native.context(f, fiber)
    })
    const [result, statements] = yield* Effect.withTracer(captureSql(effect), tracer)
    expect(spans.filter((name) => name === "sql.transaction")).toEqual([])
    return [result, statements.map((text) => text.replace(/\s+/g, " ").trim())] as const
  })

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
})
