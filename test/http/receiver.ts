/**
 * A real receiver behind HTTP for the tests: `HttpInbox` on a Node server (127.0.0.1, port 0)
 * over a SQLite inbox running the sample counter, plus an apply log written in the receipt's
 * transaction — so the order in which effects committed is exactly what the log says.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Layer, Ref } from "effect"
import * as HttpInbox from "../../src/http/HttpInbox.js"
import * as SqliteInbox from "../../src/layers/SqliteInbox.js"
import * as Counter from "../../src/sample/Counter.js"
import { applied } from "../../src/services/Inbox.js"
import type { InboxBusiness } from "../../src/services/Inbox.js"
import { TestSecret } from "./signing.js"

/** A delta the receiver's store cannot apply: the business step runs a failing statement. */
export const PoisonDelta = 13

/** The counter, refusing deltas above `maxDelta`, logging each applied event, failing on `PoisonDelta`. */
export const business = (maxDelta: Ref.Ref<number>): InboxBusiness => {
  const counter = Counter.business(maxDelta)
  return {
    setup: (sql) =>
      Effect.zipRight(
        counter.setup ? counter.setup(sql) : Effect.void,
        sql`CREATE TABLE IF NOT EXISTS apply_log (
          n INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL, flow_id TEXT NOT NULL, seq INTEGER NOT NULL)`
      ),
    apply: (delivery, sql) =>
      (delivery.body as { readonly delta?: unknown }).delta === PoisonDelta
        ? Effect.as(sql`INSERT INTO no_such_table (x) VALUES (1)`, applied)
        : Effect.tap(counter.apply(delivery, sql), (result) =>
          result._tag === "Applied"
            ? sql`INSERT INTO apply_log (event_id, flow_id, seq) VALUES (${delivery.eventId}, ${delivery.flowId}, ${delivery.seq})`
            : Effect.void)
  }
}

/** One applied event, in commit order. */
export interface Applied {
  readonly eventId: string
  readonly flowId: string
  readonly seq: number
}

/** The apply log, in commit order. */
export const applyLog = (sql: SqlClient): Effect.Effect<ReadonlyArray<Applied>, SqlError> =>
  Effect.map(
    sql<{ event_id: string; flow_id: string; seq: unknown }>`SELECT event_id, flow_id, seq FROM apply_log ORDER BY n`,
    (rows) => rows.map((row) => ({ eventId: row.event_id, flowId: row.flow_id, seq: Number(row.seq) }))
  )

/** The receiver: `Inbox` (SQLite, in memory) served over HTTP, verifying `TestSecret`; provides `Inbox` and `HttpServer`. */
export const layer = (maxDelta: Ref.Ref<number>) =>
  HttpInbox.layerServer({ secrets: TestSecret }).pipe(Layer.provideMerge(SqliteInbox.layer({ filename: ":memory:", business: business(maxDelta) })))
