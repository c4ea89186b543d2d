/**
 * A PostgreSQL queue's writers vacuum its flow and group tables (`PgVacuum`): every claim, settle
 * and enqueue leaves dead row versions there that slow the next claims until a vacuum removes
 * them. What must hold: a store written for longer than its `vacuumInterval` has been vacuumed by
 * its own process (the server's `vacuum_count`, which autovacuum does not touch) and nothing it
 * stores changed; with `vacuumInterval: null` it is never vacuumed; an enqueue
 * inside the application's transaction has its vacuum run on another connection (VACUUM cannot
 * run inside a transaction), and the application's transaction is untouched; a bad interval is an
 * `InvalidInput` naming it.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import * as PgClient from "@effect/sql-pg/PgClient"
import { it } from "@effect/vitest"
import { Effect, Redacted, Schedule } from "effect"
import { expect } from "vitest"
import { PgRelayQueue } from "../../src/index.js"
import type { RelayQueueService } from "../../src/services/RelayQueue.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

type Schema = Effect.Effect.Success<ReturnType<typeof freshSchema>>

/** The server's vacuum statistics of the schema's flow and group tables. */
const vacuums = (schema: Schema) =>
  Effect.map(
    schema.admin<{ readonly table: string; readonly vacuums: string }>`
      SELECT relname AS table, vacuum_count AS vacuums FROM pg_stat_user_tables
      WHERE schemaname = ${schema.name} AND relname IN ('relay_flow', 'relay_group') ORDER BY relname`,
    (rows) => Object.fromEntries(rows.map((r) => [r.table, { vacuums: Number(r.vacuums) }]))
  )

/** The vacuum is a fiber of its own, after the write: asked again until `ready` holds (up to 5 s). */
const vacuumsWhen = (schema: Schema, ready: (stats: Record<string, { vacuums: number }>) => boolean) =>
  Effect.flatMap(schema.admin`SELECT pg_stat_clear_snapshot()`, () => vacuums(schema)).pipe(
    Effect.filterOrFail(ready, () => "not yet" as const),
    Effect.retry({ times: 100, schedule: Schedule.spaced("50 millis") })
  )

/** Claims and settles every event of the queue, one at a time, for at least `millis`, re-enqueueing as it goes. */
const churn = (queue: RelayQueueService, millis: number) =>
  Effect.gen(function*() {
    const until = Date.now() + millis
    let n = 0
    while (Date.now() < until) {
      yield* queue.enqueue({ eventId: `e${n}`, flowId: `f${n % 4}`, group: `g${n % 2}`, body: { n } })
      const claimed = yield* queue.claim
      if (claimed._tag === "Claimed") yield* queue.settle(claimed.token, { _tag: "Accepted" })
      n++
    }
    return n
  })

describePg("PostgreSQL: the queue's writers vacuum its flow and group tables", (url) => {
  it.scopedLive("written for longer than the interval, the store is vacuumed by its own writers and loses no row", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 2, vacuumInterval: "100 millis" })
      const written = yield* churn(queue, 600)
      const stats = yield* vacuumsWhen(schema, (s) => s.relay_flow!.vacuums >= 1 && s.relay_group!.vacuums >= 1)
      expect(stats.relay_flow!.vacuums).toBeGreaterThanOrEqual(1)
      // Everything written is there: every event acked, each flow's order intact.
      const snapshot = yield* queue.snapshot
      expect(snapshot.events).toHaveLength(written)
      expect(snapshot.events.every((e) => e.state === "acked")).toBe(true)
      for (const flow of snapshot.flows) {
        const seqs = snapshot.events.filter((e) => e.flowId === flow.flowId).map((e) => e.seq)
        expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1))
      }
    }))

  it.scopedLive("vacuumInterval: null — the store's writers never vacuum it", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 2, vacuumInterval: null })
      yield* churn(queue, 600)
      // A vacuum's statistics are reported as it ends: one started by the churn would show by now.
      yield* Effect.sleep("300 millis")
      const stats = yield* vacuumsWhen(schema, () => true)
      expect(stats.relay_flow!.vacuums).toBe(0)
      expect(stats.relay_group!.vacuums).toBe(0)
    }))

  it.scopedLive("an enqueue inside the application's transaction: the vacuum runs on another connection, the transaction commits", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const sql = yield* PgClient.make({ url: Redacted.make(schema.url), maxConnections: 3 }).pipe(Effect.provide(Reactivity.layer))
      yield* sql`CREATE TABLE orders (id TEXT PRIMARY KEY)`
      const queue = yield* PgRelayQueue.makeClient({ vacuumInterval: "20 millis" }).pipe(Effect.provideService(SqlClient.SqlClient, sql))
      for (let i = 0; i < 5; i++) {
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`INSERT INTO orders (id) VALUES (${`o${i}`})`
          yield* queue.enqueue({ eventId: `o${i}:created`, flowId: `o${i % 2}`, body: { i } })
          // Still inside: the next statement of the application's transaction runs as before.
          yield* Effect.sleep("30 millis")
          yield* sql`UPDATE orders SET id = id WHERE id = ${`o${i}`}`
        }))
      }
      const stats = yield* vacuumsWhen(schema, (s) => s.relay_flow!.vacuums >= 1)
      expect(stats.relay_flow!.vacuums).toBeGreaterThanOrEqual(1)
      expect((yield* sql`SELECT id FROM orders ORDER BY id`).map((r) => r.id)).toEqual(["o0", "o1", "o2", "o3", "o4"])
      expect((yield* queue.snapshot).events).toHaveLength(5)
    }))

  for (const [what, bad] of [["a negative interval", -5], ["an interval that is not a duration", "sometimes"], ["an infinite interval", "Infinity"]] as const) {
    it.scopedLive(`${what} → InvalidInput naming vacuumInterval, nothing created`, () =>
      Effect.gen(function*() {
        const schema = yield* freshSchema(url)
        const error = yield* Effect.flip(PgRelayQueue.make({ url: schema.url, maxConnections: 1, vacuumInterval: bad as never }))
        expect(error).toMatchObject({ _tag: "InvalidInput", message: expect.stringContaining("vacuumInterval must be a finite positive duration") })
        const sql = yield* PgClient.make({ url: Redacted.make(schema.url), maxConnections: 1 }).pipe(Effect.provide(Reactivity.layer))
        const client = yield* Effect.flip(PgRelayQueue.makeClient({ vacuumInterval: bad as never }).pipe(Effect.provideService(SqlClient.SqlClient, sql)))
        expect(client).toMatchObject({ _tag: "InvalidInput", message: expect.stringContaining("vacuumInterval") })
        const tables = yield* schema.admin<{ name: string }>`
          SELECT table_name AS name FROM information_schema.tables WHERE table_schema = ${schema.name}`
        expect(tables).toEqual([])
      }))
  }
})
