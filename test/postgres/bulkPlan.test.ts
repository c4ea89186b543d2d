/**
 * Bulk statements pass their rows as one JSON parameter (`rowsTable`). PostgreSQL takes a
 * set-returning function for 100 rows; joined to `relay_event` at a backlog of ~20k events it
 * planned a sequential scan of the whole table for every settle. The rows now carry their count,
 * and the joins a settle runs (the next-head read, the event update) are index lookups — planned
 * for the values at hand, and as generic plans (the store's transactions run its statements so).
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import { it } from "@effect/vitest"
import * as PgClient from "@effect/sql-pg/PgClient"
import type * as Statement from "@effect/sql/Statement"
import { Effect, Redacted } from "effect"
import { expect } from "vitest"
import { PgRelayQueue } from "../../src/index.js"
import { rowsTable } from "../../src/layers/internal/Store.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

describePg("PostgreSQL: bulk rows joined to the event table", (url) => {
  it.scopedLive("at 20,480 events, a settle's next-head read and event update search the event table's indexes", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1 })
      for (let batch = 0; batch < 10; batch++) {
        yield* queue.enqueueBatch(Array.from({ length: 2048 }, (_, i) => {
          const n = batch * 2048 + i
          return { eventId: `e${n}`, flowId: `f${n % 64}`, body: { n } }
        }))
      }
      const sql = yield* PgClient.make({ url: Redacted.make(schema.url), maxConnections: 1 }).pipe(Effect.provide(Reactivity.layer))
      yield* sql`ANALYZE relay_event`
      const plan = (rows: ReadonlyArray<object>) => rows.map((row) => String((row as Record<string, unknown>)["QUERY PLAN"])).join("\n")
      const nextHead = plan(yield* sql`EXPLAIN SELECT e.* FROM ${
        rowsTable(sql, "relay_event", ["flow_id", "seq"], [{ flow_id: "f3", seq: 7 }])
      } JOIN relay_event e ON e.flow_id = v.flow_id AND e.seq = v.seq`)
      const update = plan(yield* sql`EXPLAIN UPDATE relay_event SET state = v.state FROM ${
        rowsTable(sql, "relay_event", ["event_id", "state"], [{ event_id: "e3", state: "acked" }])
      } WHERE relay_event.event_id = v.event_id`)
      for (const text of [nextHead, update]) {
        expect(text).toMatch(/Index Scan using \S+ on relay_event/)
        expect(text).not.toMatch(/Seq Scan on relay_event/)
      }
      // The store's transactions run its prepared statements with generic plans (planned once per
      // connection, whatever the values): those take the row count as unknown, and are index
      // lookups too.
      yield* sql`SET plan_cache_mode = force_generic_plan`
      const generic = (statement: Statement.Statement<object>, name: string) =>
        Effect.gen(function*() {
          const [text, params] = statement.compile()
          yield* sql.unsafe(`PREPARE ${name} AS ${text}`)
          const literals = params.map((value) => typeof value === "number" ? String(value) : `'${String(value).replace(/'/g, "''")}'`)
          const rows = yield* sql.unsafe(`EXPLAIN EXECUTE ${name}(${literals.join(", ")})`)
          yield* sql.unsafe(`DEALLOCATE ${name}`)
          return plan(rows)
        })
      const nextHeadGeneric = yield* generic(sql`SELECT e.* FROM ${
        rowsTable(sql, "relay_event", ["flow_id", "seq"], [{ flow_id: "f3", seq: 7 }])
      } JOIN relay_event e ON e.flow_id = v.flow_id AND e.seq = v.seq`, "next_head")
      const updateGeneric = yield* generic(sql`UPDATE relay_event SET state = v.state FROM ${
        rowsTable(sql, "relay_event", ["event_id", "state"], [{ event_id: "e3", state: "acked" }])
      } WHERE relay_event.event_id = v.event_id`, "event_update")
      for (const text of [nextHeadGeneric, updateGeneric]) {
        expect(text).toMatch(/Index Scan using \S+ on relay_event/)
        expect(text).not.toMatch(/Seq Scan on relay_event/)
      }
    }), { timeout: 60_000 })
})
