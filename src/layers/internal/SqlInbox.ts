/**
 * The inbox over SQL, shared by every backend.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Either, Schema } from "effect"
import { InvalidInput } from "../../domain/Errors.js"
import { canonicalize, parseStored } from "../../domain/Json.js"
import type { DeliveryReply } from "../../domain/Outcomes.js"
import { decideReceive } from "../../domain/Receiver.js"
import { Delivery } from "../../domain/Records.js"
import type { DeliveryInput } from "../../domain/Records.js"
import * as Faults from "../../services/Faults.js"
import type { InboxBusiness, InboxService } from "../../services/Inbox.js"
import { idType, int } from "./Store.js"
import type { Store } from "./Store.js"

/** Embedded migrations of the inbox store. */
export const migrations: Record<string, Effect.Effect<void, SqlError, SqlClient>> = {
  "1_inbox_schema": Effect.gen(function*() {
    const sql = yield* SqlClient
    const id = idType(sql)
    yield* sql`CREATE TABLE inbox_receipt (
      event_id ${id} PRIMARY KEY,
      flow_id ${id} NOT NULL,
      seq BIGINT NOT NULL,
      body TEXT NOT NULL,
      UNIQUE (flow_id, seq))`
    yield* sql`CREATE TABLE inbox_progress (flow_id ${id} PRIMARY KEY, last_seq BIGINT NOT NULL)`
  })
}

/** Name of the inbox store's migrations table. */
export const migrationsTable = "inbox_migrations"

type Row = Record<string, unknown>

// A refusal must roll back whatever the business step wrote before refusing.
class Refusal {
  readonly _tag = "Refusal"
  constructor(readonly code: string) {}
}

const decodeDelivery = Schema.decodeUnknown(Delivery)

/** Builds the inbox service over an opened store, after the business step's own setup. */
export const make = (store: Store, business: InboxBusiness): Effect.Effect<InboxService, SqlError> =>
  Effect.as(business.setup ? store.write(business.setup(store.sql)) : Effect.void, service(store, business))

const service = (store: Store, business: InboxBusiness): InboxService => {
  const { sql } = store

  const receive = (input: DeliveryInput) =>
    Effect.gen(function*() {
      const delivery = yield* Effect.mapError(
        decodeDelivery(input),
        (error) => new InvalidInput({ operation: "receive", message: error.message })
      )
      const body = yield* Either.match(canonicalize(delivery.body, Number.MAX_SAFE_INTEGER), {
        onLeft: (message) => Effect.fail(new InvalidInput({ operation: "receive", message })),
        onRight: Effect.succeed
      })
      const incoming = { eventId: delivery.eventId, flowId: delivery.flowId, seq: delivery.seq, bodyText: body.text }
      const reply = yield* store.write(
        Effect.gen(function*() {
          const [receipt] = yield* sql<Row>`SELECT * FROM inbox_receipt WHERE event_id = ${delivery.eventId}`
          const [progress] = yield* sql<Row>`SELECT last_seq FROM inbox_progress WHERE flow_id = ${delivery.flowId}`
          const stored = receipt === undefined ? undefined : {
            eventId: receipt.event_id as string,
            flowId: receipt.flow_id as string,
            seq: int(receipt.seq),
            bodyText: receipt.body as string
          }
          const decision = decideReceive(incoming, stored, progress === undefined ? 0 : int(progress.last_seq))
          if (decision._tag === "Reply") return decision.reply
          const result = yield* business.apply({ ...delivery, body: body.value }, sql)
          if (result._tag === "Refused") return yield* Effect.fail(new Refusal(result.code))
          yield* sql`INSERT INTO inbox_receipt (event_id, flow_id, seq, body)
            VALUES (${delivery.eventId}, ${delivery.flowId}, ${delivery.seq}, ${body.text})`
          yield* progress === undefined
            ? sql`INSERT INTO inbox_progress (flow_id, last_seq) VALUES (${delivery.flowId}, ${delivery.seq})`
            : sql`UPDATE inbox_progress SET last_seq = ${delivery.seq} WHERE flow_id = ${delivery.flowId}`
          yield* Faults.hit("receive:before-commit")
          return { _tag: "Accepted" } as DeliveryReply
        })
      ).pipe(
        Effect.catchIf(
          (error): error is Refusal => error instanceof Refusal,
          (refusal) => Effect.succeed<DeliveryReply>({ _tag: "Rejected", code: refusal.code })
        )
      )
      if (reply._tag === "Accepted") yield* Faults.hit("receive:after-commit")
      return reply
    }).pipe(Effect.withSpan("Inbox.receive"))

  const receipts = store.read(
    Effect.map(sql<Row>`SELECT * FROM inbox_receipt ORDER BY flow_id, seq`, (rows) =>
      rows.map((row) => ({
        eventId: row.event_id as string,
        flowId: row.flow_id as string,
        seq: int(row.seq),
        body: parseStored(row.body as string)
      })))
  )

  const progress = store.read(
    Effect.map(
      sql<Row>`SELECT flow_id, last_seq FROM inbox_progress ORDER BY flow_id`,
      (rows) => new Map(rows.map((row) => [row.flow_id as string, int(row.last_seq)]))
    )
  )

  const read = <A, E>(query: (sql: SqlClient) => Effect.Effect<A, E>) => store.read(query(sql))

  return { receive, receipts, progress, read }
}
