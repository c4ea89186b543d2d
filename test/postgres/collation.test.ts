/**
 * Ids are TEXT COLLATE "C" on PostgreSQL: the `(served, flow_id)` tie-break compares UTF-8 bytes,
 * as SQLite's BINARY collation and `Protocol.compareIds` do (test/layers/collation.test.ts checks
 * the SQLite side), whatever the database's own collation. Flows that all tie at served 0 are
 * claimed in exactly the `compareIds` order.
 */
import { seedPolicy } from "../../src/domain/Policy.js"
import { it } from "@effect/vitest"
import { Effect } from "effect"
import { expect } from "vitest"
import { PgRelayQueue, Protocol, TickClock } from "../../src/index.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

// Upper before lower case, accents, BMP above surrogates vs astral characters (UTF-16 order differs).
const ids = ["b", "a", "B", "\uFF01", "😀", "ab", "Z", "\u00e9", "e", "\uFFFD", "𐀀", "a b", "a-b", "A"]

describePg("PostgreSQL id collation", (url) => {
  it.scopedLive("flows tied at served 0 are claimed in compareIds (UTF-8 byte) order", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, policy: seedPolicy })
      yield* queue.enqueueBatch(ids.map((flowId, i) => ({ eventId: `e${i}`, flowId, body: { delta: 1 } }))).pipe(TickClock.at(0))
      const claimed = yield* Effect.forEach(ids, () =>
        Effect.map(queue.claim.pipe(TickClock.at(0)), (c) => (c._tag === "Claimed" ? c.event.flowId : "<idle>")))
      const expected = [...ids].sort(Protocol.compareIds)
      expect(claimed).toEqual(expected)
      // Neither JavaScript's default (UTF-16) order nor a case-insensitive one.
      expect(expected).not.toEqual([...ids].sort())
      expect(expected).not.toEqual([...ids].sort((a, b) => a.localeCompare(b)))
      // The snapshot lists flows in the same byte order.
      expect((yield* queue.snapshot).flows.map((f) => f.flowId)).toEqual(expected)

      // The order comes from the columns, not from this database's default collation.
      const columns = yield* schema.admin<{ table_name: string; column_name: string; collation_name: string | null }>`
        SELECT table_name, column_name, collation_name FROM information_schema.columns
        WHERE table_schema = ${schema.name} AND column_name IN ('flow_id', 'event_id') AND table_name IN ('relay_flow', 'relay_event')
        ORDER BY table_name, column_name`
      expect(columns.map((c) => [c.table_name, c.column_name, c.collation_name])).toEqual([
        ["relay_event", "event_id", "C"],
        ["relay_event", "flow_id", "C"],
        ["relay_flow", "flow_id", "C"]
      ])
      // A database whose default is a linguistic collation (ICU, where the server has it) would
      // order the same ids differently; COLLATE "C" keeps the turn order the same everywhere.
      const [icu] = yield* schema.admin<{ n: unknown }>`SELECT count(*) AS n FROM pg_collation WHERE collname = 'und-x-icu'`
      if (Number(icu?.n) > 0) {
        const values = ids.map((id) => `('${id.replace(/'/g, "''")}')`).join(", ")
        const linguistic = yield* schema.admin.unsafe<{ id: string }>(`SELECT id FROM (VALUES ${values}) AS v(id) ORDER BY id COLLATE "und-x-icu"`)
        expect(linguistic.map((r) => r.id)).not.toEqual(expected)
      }
    }))
})
