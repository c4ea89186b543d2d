/**
 * The receiver: an HTTP endpoint that verifies each delivery's signature, drops duplicates, and
 * applies each customer's events in order, exactly once — the business write and the receipt
 * commit in one transaction of its own database.
 *
 *   INBOX_DB=inbox.db PORT=8080 WEBHOOK_SECRET=whsec_… node --import tsx examples/receiver.ts
 *
 * PORT=0 picks a free port; the first line it prints is the URL to give the worker.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import type { SqlClient } from "@effect/sql/SqlClient"
import { Config, Effect, Layer } from "effect"
import { HttpInbox, Inbox, SqliteInbox } from "../src/index.js" // in your app: from "fair-relay"
import type { Delivery, InboxBusiness } from "../src/index.js"

/** The business step: one ledger line per order, written in the receipt's transaction. */
const ledger: InboxBusiness = {
  setup: (sql) =>
    Effect.asVoid(sql`CREATE TABLE IF NOT EXISTS ledger (
      line INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL, customer TEXT NOT NULL,
      seq INTEGER NOT NULL, order_id TEXT NOT NULL, total INTEGER NOT NULL)`),
  apply: Effect.fnUntraced(function*(delivery: Delivery, sql: SqlClient) {
    const { orderId, total } = delivery.body as { readonly orderId?: unknown; readonly total?: unknown }
    if (typeof orderId !== "string" || typeof total !== "number") return Inbox.refuse("not_an_order")
    yield* sql`INSERT INTO ledger (event_id, customer, seq, order_id, total)
      VALUES (${delivery.eventId}, ${delivery.flowId}, ${delivery.seq}, ${orderId}, ${total})`
    return Inbox.applied
  })
}

const program = Effect.gen(function*() {
  const secret = yield* Config.redacted("WEBHOOK_SECRET")
  const port = yield* Config.integer("PORT").pipe(Config.withDefault(8080))
  const Server = HttpInbox.layerServer({ secrets: secret, port }).pipe(
    Layer.provide(SqliteInbox.layer({ filename: process.env.INBOX_DB ?? "inbox.db", business: ledger }))
  )
  yield* Effect.flatMap(HttpInbox.url, (url) => Effect.sync(() => console.log(`receiver listening on ${url}`))).pipe(
    Effect.zipRight(Effect.never),
    Effect.provide(Server)
  )
})

program.pipe(NodeRuntime.runMain)
