/**
 * What a single-step claim and settle send to PostgreSQL, statement by statement (BEGIN goes with
 * the first, COMMIT with the last): the clock read first (with BEGIN and the store's lock), the
 * writes nobody reads together in one statement, and with exact claims the settled event read
 * with the event after it. The bench's figures (6 round trips per event exact, 8 parallel; the
 * daemon's `settleAndClaim`, 5 and 7) rest on these shapes.
 */
import { it } from "@effect/vitest"
import { Effect } from "effect"
import { expect } from "vitest"
import { PgRelayQueue } from "../../src/index.js"
import { captureSql } from "../../scenarios/support/captureSql.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

describePg("PostgreSQL: statements of a claim and a settle", (url) => {
  for (const claims of ["exact", "parallel"] as const) {
    it.scopedLive(`${claims} claims`, () =>
      Effect.gen(function*() {
        const schema = yield* freshSchema(url)
        const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, claims })
        yield* queue.enqueueBatch([{ eventId: "A1", flowId: "A", body: {} }, { eventId: "A2", flowId: "A", body: {} }])
        const [claimed, claimSql] = yield* captureSql(queue.claim)
        if (claimed._tag !== "Claimed") return yield* Effect.dieMessage("expected a claim")
        const [outcome, settleSql] = yield* captureSql(queue.settle(claimed.token, { _tag: "Accepted" }))
        expect(outcome._tag).toBe("Acked")
        // A2 is the flow's head now: the settle found it.
        expect((yield* queue.snapshot).flows.find((f) => f.flowId === "A")?.headSeq).toBe(2)
        const clock = claims === "exact" ? /^SELECT tick, ticket FROM relay_clock/ : /^SELECT c\.tick, s\.last_value AS ticket FROM relay_clock/
        expect(claimSql).toHaveLength(claims === "exact" ? 3 : 4)
        expect(settleSql).toHaveLength(claims === "exact" ? 3 : 4)
        expect(claimSql[0]).toMatch(clock)
        expect(settleSql[0]).toMatch(clock)
        // The claim's event update, flow update (and clock) as one statement.
        expect(claimSql[claimSql.length - 1]).toMatch(/^WITH held_0 AS \(/)
        expect(claimSql[claimSql.length - 1]).toMatch(/UPDATE relay_event/)
        expect(claimSql[claimSql.length - 1]).toMatch(/INSERT INTO relay_flow/)
        // The settle's event update goes in front of the head update.
        expect(settleSql[settleSql.length - 1]).toMatch(/^WITH held_0 AS \(.*UPDATE relay_event[\s\S]*\) UPDATE relay_flow SET head_seq/s)
        if (claims === "exact") expect(settleSql[1]).toMatch(/UNION ALL SELECT 1 AS next/)
      }))

    it.scopedLive(`${claims} claims: settleAndClaim is one transaction: one clock read, and the claim sees the ack`, () =>
      Effect.gen(function*() {
        const schema = yield* freshSchema(url)
        const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, claims })
        yield* queue.enqueueBatch([1, 2, 3].map((i) => ({ eventId: `A${i}`, flowId: "A", body: {} })))
        const { claims: [first] } = yield* queue.claimUpTo(1)
        if (first === undefined) return yield* Effect.dieMessage("expected a claim")
        const [result, sql] = yield* captureSql(queue.settleAndClaim([{ token: first.token, reply: { _tag: "Accepted" } }], 1))
        // A1 acked, and the claim in the same transaction found A2, which only that ack made the head.
        expect(result.outcomes).toEqual([{ _tag: "Acked" }])
        expect(result.claims.map((c) => c.event.eventId)).toEqual(["A2"])
        // A settle then a claim: 3 + 3 statements (4 + 4 parallel) — less the claim's clock read.
        expect(sql).toHaveLength(claims === "exact" ? 5 : 7)
        expect(sql.filter((text) => /FROM relay_clock/.test(text) && /^SELECT/.test(text))).toHaveLength(1)
      }))
  }
})
