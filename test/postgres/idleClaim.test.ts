/**
 * An idle claim does not walk the flows that wait. The claim reads its candidates first; the
 * walk's LIMIT is 0 unless the earliest `eligible_at` is due (one seek of the wake index), and a
 * LIMIT of 0 is worked out before the walk. Replayed with `EXPLAIN ANALYZE` on the statement the
 * idle claim really sent: the turn index is never scanned, while the same statement at a time
 * when heads are due does scan it.
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
      const walk = statements.find((text) => /ORDER BY f\.served/.test(text))
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
})
