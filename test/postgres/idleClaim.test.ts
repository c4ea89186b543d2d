/**
 * An idle claim does not walk the flows that wait. The claim reads its candidates first; the
 * walk's LIMIT is 0 unless the earliest `eligible_at` is due (one seek of the wake index), and a
 * LIMIT of 0 is worked out before the walk. Replayed with `EXPLAIN ANALYZE` on the statement the
 * idle claim really sent: the turn index is never scanned, while the same statement at a time
 * when heads are due does scan it. A claim that finds many flows due reads the heads of the flows
 * it takes, not of every flow due — also on a store of many flows and no groups whose flow and
 * event tables have statistics and whose (never written) group table has none, as autovacuum
 * leaves it: the grouped part of the walk reads nothing there.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import { it } from "@effect/vitest"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, Redacted } from "effect"
import { expect } from "vitest"
import { PgRelayQueue } from "../../src/index.js"
import { captureSql, walkParams } from "../../scenarios/support/captureSql.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

describePg("PostgreSQL: an idle claim", (url) => {
  it.scopedLive("does not walk the turn index when no head is due, and does when one is", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, policy: { leaseTicks: "1 hour" } })
      yield* queue.enqueueBatch(Array.from({ length: 200 }, (_, i) => ({ eventId: `e${i}`, flowId: `f${i % 50}`, body: {} })))
      // Every flow's head in flight for an hour: nothing is due.
      expect(yield* queue.claimBatch(50)).toHaveLength(50)
      const [idle, statements] = yield* captureSql(queue.claim)
      expect(idle._tag).toBe("Idle")
      const walk = statements.find((text) => /ORDER BY (f\.)?served/.test(text))
      expect(walk, statements.join("\n")).toBeDefined()
      const sql = yield* PgClient.make({ url: Redacted.make(schema.url), maxConnections: 1 }).pipe(Effect.provide(Reactivity.layer))
      const explain = (now: number) =>
        Effect.gen(function*() {
          yield* sql.unsafe(`PREPARE idle_walk AS ${walk!}`)
          const values = walkParams(walk!, now, 1)
          const rows = yield* sql.unsafe(`EXPLAIN (ANALYZE, COSTS OFF) EXECUTE idle_walk(${values.join(", ")})`)
          yield* sql.unsafe("DEALLOCATE idle_walk")
          return rows.map((row) => String((row as Record<string, unknown>)["QUERY PLAN"])).filter((line) => /relay_flow_turn/.test(line))
        })
      const now = Date.now()
      const idleWalk = yield* explain(now)
      expect(idleWalk.length).toBeGreaterThan(0)
      for (const line of idleWalk) expect(line).toMatch(/never executed/)
      // Two hours on, every head is due: the same statement walks the index.
      const dueWalk = yield* explain(now + 2 * 3600_000)
      expect(dueWalk.some((line) => !/never executed/.test(line))).toBe(true)
    }), { timeout: 60_000 })

  // Three states of a store's statistics: none yet (just filled); what autovacuum leaves on a
  // store without groups — its flow and event tables analyzed, its group table (never written)
  // not, so that the planner guesses the group table's size; and every table analyzed, on a store
  // whose flows are in groups. With none yet, a claim of either mode reads the flows due to sort
  // them, but only the head it takes (docs/postgres.md, "Known limits").
  const cases = [
    { claims: "exact", state: "not gathered yet", analyze: [], flowsRead: Infinity, groups: 0 },
    { claims: "parallel", state: "not gathered yet", analyze: [], flowsRead: Infinity, groups: 0 },
    { claims: "exact", state: "gathered on the flow and event tables only", analyze: ["ANALYZE relay_flow", "ANALYZE relay_event"], flowsRead: 4, groups: 0 },
    { claims: "parallel", state: "gathered on the flow and event tables only", analyze: ["ANALYZE relay_flow", "ANALYZE relay_event"], flowsRead: 4, groups: 0 },
    // Every flow in one of 40 groups: the groups' walk drives the rest (an exact claim read the
    // whole event table here before cc9a654, a parallel claim joined every flow to its group
    // before the parallel walk took the same shape).
    { claims: "exact", state: "gathered on every table, flows in groups", analyze: ["ANALYZE"], flowsRead: 4, groups: 40 },
    { claims: "parallel", state: "gathered on every table, flows in groups", analyze: ["ANALYZE"], flowsRead: 4, groups: 40 }
  ] as const
  for (const { analyze, claims, flowsRead, groups, state } of cases) {
    it.scopedLive(`${claims} claims, statistics ${state}: a claim reads the head it takes${flowsRead === Infinity ? "" : " and its flow"}, not every flow's`, () =>
      Effect.gen(function*() {
        const schema = yield* freshSchema(url)
        const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, claims })
        // Without statistics the planner expects few eligible flows (it once joined every eligible
        // flow to its head and sorted them all to keep one); with the group table's guessed, it
        // joined every flow to its head before looking at the groups.
        const flows = 400
        yield* queue.enqueueBatch(Array.from({ length: 2 * flows }, (_, i) => ({
          eventId: `e${i}`,
          flowId: `f${i % flows}`,
          body: {},
          ...(groups === 0 ? {} : { group: `g${i % groups}` })
        })))
        const sql = yield* PgClient.make({ url: Redacted.make(schema.url), maxConnections: 1 }).pipe(Effect.provide(Reactivity.layer))
        for (const statement of analyze) yield* sql.unsafe(statement)
        const [claimed, statements] = yield* captureSql(queue.claim)
        expect(claimed._tag).toBe("Claimed")
        const walk = statements.find((text) => /ORDER BY (f\.)?served/.test(text))
        expect(walk, statements.join("\n")).toBeDefined()
        // As the store's transactions plan it: once, for any values; rolled back, since the
        // parallel walk locks what it reads.
        yield* sql.unsafe("SET plan_cache_mode = force_generic_plan")
        yield* sql.unsafe(`PREPARE due_walk AS ${walk!}`)
        yield* sql.unsafe("BEGIN")
        const rows = yield* sql.unsafe(`EXPLAIN (ANALYZE, COSTS OFF) EXECUTE due_walk(${walkParams(walk!, Date.now(), 1).join(", ")})`)
        yield* sql.unsafe("ROLLBACK")
        const plan = rows.map((row) => String((row as Record<string, unknown>)["QUERY PLAN"]))
        // Rows read from a table: rows × loops of every scan of it (a bitmap scan counted by its heap scan).
        const read = (table: string) =>
          plan.filter((line) => new RegExp(` on ${table} `).test(line) && !/Bitmap Index Scan/.test(line)).reduce((sum, line) => {
            const actual = /actual time=\S+ rows=(\d+) loops=(\d+)/.exec(line)
            return sum + (actual === null ? 0 : Number(actual[1]) * Number(actual[2]))
          }, 0)
        expect(read("relay_event"), plan.join("\n")).toBe(1)
        // The walk's own flow and the least eligible_at: never every flow.
        if (flowsRead !== Infinity) expect(read("relay_flow"), plan.join("\n")).toBeLessThanOrEqual(flowsRead)
      }), { timeout: 60_000 })
  }
})
