/**
 * A claim rewrites its event's row in place. It changes the event's state but no column any index
 * of relay_event covers (retention's index is over `acked_at`, set only by an ack), so PostgreSQL
 * makes it a HOT update: no new entry in the event table's indexes, less WAL, less to vacuum. An
 * ack sets `acked_at` and does add entries. Counted by the server's statistics, which a backend
 * reports as it exits: the store is closed before they are read. And the prune still finds acked
 * events through that index, on the generic plan the store's statements run with.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import { it } from "@effect/vitest"
import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, Redacted } from "effect"
import { expect } from "vitest"
import { PgRelayQueue } from "../../src/index.js"
import { captureSql } from "../../scenarios/support/captureSql.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

const retention = { acked: 100, dedup: 1000 }

describePg("PostgreSQL: claims update events in place", (url) => {
  it.scopedLive("a claim adds no index entry (a HOT update); an ack does; a prune searches the acked index", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      // Few enough that every row version fits the table's first page: a claim finds room there
      // for its new version without the page being pruned (which another test's open
      // transaction in this database could hold back).
      const events = 8
      const pruneReads = yield* Effect.scoped(Effect.gen(function*() {
        const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, policy: { leaseTicks: "1 hour" }, retention })
        yield* queue.enqueueBatch(Array.from({ length: events }, (_, i) => ({ eventId: `e${i}`, flowId: `f${i}`, body: { i } })))
        for (let i = 0; i < events; i++) {
          const claimed = yield* queue.claim
          if (claimed._tag !== "Claimed") return yield* Effect.dieMessage("expected a claim")
          expect((yield* queue.settle(claimed.token, { _tag: "Accepted" }))._tag).toBe("Acked")
        }
        const [, statements] = yield* captureSql(queue.prune({ dryRun: true }))
        return statements.filter((s) => /FROM relay_event\b/.test(s) && /acked_at <=/.test(s))
      }))
      // The store's connections are closed: their backends reported their counts as they exited.
      const sql = yield* PgClient.make({ url: Redacted.make(schema.url), maxConnections: 1 }).pipe(Effect.provide(Reactivity.layer))
      const counts = sql<{ readonly updated: string; readonly hot: string }>`SELECT n_tup_upd AS updated, n_tup_hot_upd AS hot
        FROM pg_stat_user_tables WHERE schemaname = ${schema.name} AND relname = 'relay_event'`.pipe(
        Effect.map(([row]) => ({ updated: Number(row?.updated ?? 0), hot: Number(row?.hot ?? 0) }))
      )
      let seen = yield* counts
      for (let waited = 0; seen.updated < 2 * events && waited < 10_000; waited += 100) {
        yield* Effect.sleep("100 millis")
        seen = yield* counts
      }
      // One claim and one ack per event.
      expect(seen.updated).toBe(2 * events)
      // Every claim in place; every ack not (it sets acked_at).
      expect(seen.hot).toBe(events)

      expect(pruneReads.length).toBeGreaterThan(0)
      yield* sql.unsafe(`SET plan_cache_mode = force_generic_plan`)
      yield* sql.unsafe(`SET enable_seqscan = off`)
      for (const read of pruneReads) {
        yield* sql.unsafe(`PREPARE prune_read AS ${read}`)
        const values = read.split(/\$\d+/).slice(0, -1).map((before) => (/LIMIT\s*$/.test(before) ? 100 : Date.now()))
        const plan = (yield* sql.unsafe(`EXPLAIN EXECUTE prune_read(${values.join(", ")})`))
          .map((row) => String((row as Record<string, unknown>)["QUERY PLAN"]))
        yield* sql.unsafe("DEALLOCATE prune_read")
        expect(plan.some((line) => /Index (Only )?Scan (using|on) relay_event_acked\b/.test(line)), `${read}\n${plan.join("\n")}`).toBe(true)
      }
    }), { timeout: 60_000 })
})
