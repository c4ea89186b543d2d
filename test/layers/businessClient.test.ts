/**
 * The client a receiver's business step is handed (`BusinessClient`): its statements run on the
 * inbox's transaction — read what the step wrote before them, roll back with a refusal — in each
 * way a statement can run, and a statement transformer the application installed still sees
 * every one of them. Once per receiver store (SQLite; PostgreSQL when FAIR_RELAY_PG_URL is set).
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import * as Statement from "@effect/sql/Statement"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Tracer } from "effect"
import type { Scope } from "effect"
import * as PgInbox from "../../src/layers/PgInbox.js"
import * as SqliteInbox from "../../src/layers/SqliteInbox.js"
import * as Inbox from "../../src/services/Inbox.js"
import type { InboxBusiness, InboxService } from "../../src/services/Inbox.js"
import { freshSchema, pgUrl } from "../support/backends.js"

/** At most two deliveries per flow are applied; the third is refused after writing its row. */
const business: InboxBusiness = {
  setup: (sql) => Effect.asVoid(sql`CREATE TABLE IF NOT EXISTS seen (flow_id TEXT NOT NULL, seq INTEGER NOT NULL)`),
  apply: (delivery, sql) =>
    Effect.gen(function*() {
      const insert = sql.onDialectOrElse({ pg: () => "INSERT INTO seen (flow_id, seq) VALUES ($1, $2)", orElse: () => "INSERT INTO seen (flow_id, seq) VALUES (?, ?)" })
      yield* sql.unsafe(insert, [delivery.flowId, delivery.seq])
      const [row] = yield* sql<{ readonly n: number | string }>`SELECT COUNT(*) AS n FROM seen WHERE flow_id = ${delivery.flowId}`
      const values = yield* sql`SELECT seq FROM seen WHERE flow_id = ${delivery.flowId} ORDER BY seq`.values
      const raw = yield* sql`SELECT seq FROM seen WHERE flow_id = ${delivery.flowId} ORDER BY seq`.withoutTransform
      if ((delivery.body as { readonly nested?: boolean }).nested === true) {
        // A savepoint of the step's own: what it wrote goes with it; what follows it stays.
        const undone = sql.withTransaction(Effect.zipRight(sql`INSERT INTO seen (flow_id, seq) VALUES (${delivery.flowId}, ${delivery.seq + 50})`, Effect.fail("undo")))
        yield* Effect.either(undone)
        yield* sql`INSERT INTO seen (flow_id, seq) VALUES (${delivery.flowId}, ${delivery.seq + 100})`
      }
      // What this step wrote is there already, in either reading.
      if (values.length !== Number(row!.n) || raw.length !== Number(row!.n)) return yield* Effect.dieMessage("the step's reads disagree")
      return Number(row!.n) > 2 ? Inbox.refuse("full") : Inbox.applied
    })
}

const rows = (inbox: InboxService) =>
  inbox.read((sql: SqlClient) => sql<{ readonly flow_id: string; readonly seq: number | string }>`SELECT flow_id, seq FROM seen ORDER BY flow_id, seq`)

const suite = (open: () => Effect.Effect<InboxService, unknown, Scope.Scope>) => {
  it.scoped("a business step's statements read what it wrote in the inbox's transaction, and a refusal rolls them back", () =>
    Effect.gen(function*() {
      const inbox = yield* open()
      const replies = yield* Effect.forEach([1, 2, 3], (seq) => inbox.receive({ eventId: `A${seq}`, flowId: "A", seq, body: {} }))
      expect(replies.map((r) => r._tag)).toEqual(["Accepted", "Accepted", "Rejected"])
      expect((yield* rows(inbox)).map((r) => [r.flow_id, Number(r.seq)])).toEqual([["A", 1], ["A", 2]])
    }))

  it.scoped("a savepoint of the business step's own is rolled back alone, and its step's writes around it stay", () =>
    Effect.gen(function*() {
      const inbox = yield* open()
      const reply = yield* inbox.receive({ eventId: "C1", flowId: "C", seq: 1, body: { nested: true } })
      expect(reply._tag).toBe("Accepted")
      expect((yield* rows(inbox)).map((r) => [r.flow_id, Number(r.seq)])).toEqual([["C", 1], ["C", 101]])
    }))

  it.scoped("where a tracer is installed, the business step's statements and savepoint keep their spans", () =>
    Effect.gen(function*() {
      const inbox = yield* open()
      const builtIn = yield* Effect.tracer
      const names: Array<string> = []
      const recording = Tracer.make({
        span: (name, ...rest) => (names.push(name), builtIn.span(name, ...rest)),
        context: builtIn.context
      })
      const reply = yield* inbox.receive({ eventId: "D1", flowId: "D", seq: 1, body: {} }).pipe(Effect.withTracer(recording))
      expect(reply._tag).toBe("Accepted")
      expect(names).toContain("sql.transaction")
      expect(names.filter((name) => name === "sql.execute").length).toBeGreaterThanOrEqual(4)
    }))

  it.scoped("a statement transformer the application installed sees the business step's statements", () =>
    Effect.gen(function*() {
      const inbox = yield* open()
      const seen: Array<string> = []
      const reply = yield* inbox.receive({ eventId: "B1", flowId: "B", seq: 1, body: {} }).pipe(
        Statement.withTransformer((statement) => Effect.sync(() => (seen.push(statement.compile()[0]), statement)))
      )
      expect(reply._tag).toBe("Accepted")
      expect(seen.some((text) => text.startsWith("SELECT COUNT(*) AS n FROM seen"))).toBe(true)
      expect(seen.some((text) => text.startsWith("INSERT INTO seen"))).toBe(true)
    }))
}

describe("sqlite", () => suite(() => SqliteInbox.make({ filename: ":memory:", business })))
if (pgUrl === undefined) describe.skip("postgres [SKIPPED: FAIR_RELAY_PG_URL is not set]", () => suite(() => Effect.never))
else describe("postgres", () => suite(() => Effect.flatMap(freshSchema(pgUrl!), (schema) => PgInbox.make({ url: schema.url, business, maxConnections: 2 }))))
