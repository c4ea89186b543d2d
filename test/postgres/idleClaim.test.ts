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

  it.scopedLive("reads the heads of the flows it takes only, on a store whose statistics are not gathered yet", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1 })
      // Just filled, never analyzed: the planner expects few eligible flows (it once joined every
      // eligible flow to its head and sorted them all to keep one).
      yield* queue.enqueueBatch(Array.from({ length: 256 }, (_, i) => ({ eventId: `e${i}`, flowId: `f${i % 64}`, body: {} })))
      const [claimed, statements] = yield* captureSql(queue.claim)
      expect(claimed._tag).toBe("Claimed")
      const walk = statements.find((text) => /ORDER BY (f\.)?served/.test(text))
      expect(walk, statements.join("\n")).toBeDefined()
      const sql = yield* PgClient.make({ url: Redacted.make(schema.url), maxConnections: 1 }).pipe(Effect.provide(Reactivity.layer))
      // As the store's transactions plan it: once, for any values.
      yield* sql.unsafe("SET plan_cache_mode = force_generic_plan")
      yield* sql.unsafe(`PREPARE due_walk AS ${walk!}`)
      const rows = yield* sql.unsafe(`EXPLAIN (ANALYZE, COSTS OFF) EXECUTE due_walk(${walkParams(walk!, Date.now(), 1).join(", ")})`)
      const plan = rows.map((row) => String((row as Record<string, unknown>)["QUERY PLAN"]))
      // Heads read: rows × loops of every scan of the event table.
      const headsRead = plan.filter((line) => / on relay_event /.test(line)).reduce((sum, line) => {
        const actual = /actual time=\S+ rows=(\d+) loops=(\d+)/.exec(line)
        return sum + (actual === null ? 0 : Number(actual[1]) * Number(actual[2]))
      }, 0)
      expect(headsRead, plan.join("\n")).toBe(1)
    }), { timeout: 60_000 })

  for (const claims of ["exact", "parallel"] as const) {
    it.scopedLive(`${claims} claims: with no groups and the group table never analyzed, a claim reads no flow but the ones it takes`, () =>
      Effect.gen(function*() {
        const schema = yield* freshSchema(url)
        const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, claims })
        const flows = 400
        yield* queue.enqueueBatch(Array.from({ length: 2 * flows }, (_, i) => ({ eventId: `e${i}`, flowId: `f${i % flows}`, body: {} })))
        // What autovacuum does on a store without groups: the written tables are analyzed, the
        // group table (never written) is not, and the planner guesses its size.
        const sql = yield* PgClient.make({ url: Redacted.make(schema.url), maxConnections: 1 }).pipe(Effect.provide(Reactivity.layer))
        yield* sql.unsafe("ANALYZE relay_flow")
        yield* sql.unsafe("ANALYZE relay_event")
        const [claimed, statements] = yield* captureSql(queue.claim)
        expect(claimed._tag).toBe("Claimed")
        const walk = statements.find((text) => /ORDER BY (f\.)?served/.test(text))
        expect(walk, statements.join("\n")).toBeDefined()
        yield* sql.unsafe("SET plan_cache_mode = force_generic_plan")
        yield* sql.unsafe(`PREPARE wide_walk AS ${walk!}`)
        // In a transaction rolled back: the parallel walk locks what it reads.
        yield* sql.unsafe("BEGIN")
        const rows = yield* sql.unsafe(`EXPLAIN (ANALYZE, COSTS OFF) EXECUTE wide_walk(${walkParams(walk!, Date.now(), 1).join(", ")})`)
        yield* sql.unsafe("ROLLBACK")
        const plan = rows.map((row) => String((row as Record<string, unknown>)["QUERY PLAN"]))
        // Rows read: rows × loops of every scan of a table (a bitmap heap scan's index counted once, by its heap).
        const read = (table: string) =>
          plan.filter((line) => new RegExp(` on ${table} `).test(line) && !/Bitmap Index Scan/.test(line)).reduce((sum, line) => {
            const actual = /actual time=\S+ rows=(\d+) loops=(\d+)/.exec(line)
            return sum + (actual === null ? 0 : Number(actual[1]) * Number(actual[2]))
          }, 0)
        expect(read("relay_event"), plan.join("\n")).toBe(1)
        // The walk's own flow, and the least eligible_at (one index entry): never every flow.
        expect(read("relay_flow"), plan.join("\n")).toBeLessThanOrEqual(4)
      }), { timeout: 60_000 })
  }
})
