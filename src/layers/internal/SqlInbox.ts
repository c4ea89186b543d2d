/**
 * The inbox over SQL, shared by every backend.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Either } from "effect"
import { InvalidInput } from "../../domain/Errors.js"
import { decodeInput, shorten } from "../../domain/Input.js"
import { canonicalize, parseStored } from "../../domain/Json.js"
import type { DeliveryReply } from "../../domain/Outcomes.js"
import { decideReceive } from "../../domain/Receiver.js"
import { Delivery } from "../../domain/Records.js"
import type { DeliveryInput } from "../../domain/Records.js"
import * as Faults from "../../services/Faults.js"
import type { InboxBusiness, InboxService } from "../../services/Inbox.js"
import { idType, int, isolated } from "./Store.js"
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


/** Builds the inbox service over an opened store, after the business step's own setup. */
export const make = (store: Store, business: InboxBusiness): Effect.Effect<InboxService, SqlError> =>
  Effect.as(business.setup ? store.write(business.setup(store.sql)) : Effect.void, service(store, business))

const service = (store: Store, business: InboxBusiness): InboxService => {
  const { sql } = store

  const decode = (input: DeliveryInput, operation: string) =>
    Effect.gen(function*() {
      const delivery = yield* decodeInput(Delivery, operation)(input)
      const body = yield* Either.match(canonicalize(delivery.body, Number.MAX_SAFE_INTEGER), {
        onLeft: (message) => Effect.fail(new InvalidInput({ operation, message: shorten(message) })),
        onRight: Effect.succeed
      })
      return { delivery, body }
    })

  /**
   * One delivery inside the store's write transaction, in a savepoint of its own: a refusal rolls
   * back whatever the business step wrote, and nothing else.
   */
  const receiveOne = ({ body, delivery }: Effect.Effect.Success<ReturnType<typeof decode>>) =>
    sql.withTransaction(
      Effect.gen(function*() {
        const [receipt] = yield* sql<Row>`SELECT * FROM inbox_receipt WHERE event_id = ${delivery.eventId}`
        const [progress] = yield* sql<Row>`SELECT last_seq FROM inbox_progress WHERE flow_id = ${delivery.flowId}`
        const stored = receipt === undefined ? undefined : {
          eventId: receipt.event_id as string,
          flowId: receipt.flow_id as string,
          seq: int(receipt.seq),
          bodyText: receipt.body as string
        }
        const incoming = { eventId: delivery.eventId, flowId: delivery.flowId, seq: delivery.seq, bodyText: body.text }
        const decision = decideReceive(incoming, stored, progress === undefined ? 0 : int(progress.last_seq))
        if (decision._tag === "Reply") return decision.reply
        const result = yield* business.apply({ ...delivery, body: body.value }, sql)
        if (result._tag === "Refused") return yield* Effect.fail(new Refusal(result.code))
        yield* sql`INSERT INTO inbox_receipt (event_id, flow_id, seq, body)
          VALUES (${delivery.eventId}, ${delivery.flowId}, ${delivery.seq}, ${body.text})`
        yield* progress === undefined
          ? sql`INSERT INTO inbox_progress (flow_id, last_seq) VALUES (${delivery.flowId}, ${delivery.seq})`
          : sql`UPDATE inbox_progress SET last_seq = ${delivery.seq} WHERE flow_id = ${delivery.flowId}`
        return { _tag: "Accepted" } as DeliveryReply
      })
    ).pipe(
      Effect.catchIf(
        (error): error is Refusal => error instanceof Refusal,
        (refusal) => Effect.succeed<DeliveryReply>({ _tag: "Rejected", code: refusal.code })
      )
    )

  /** Receives decoded deliveries in one transaction, with the fault points around its commit. */
  const receiveAll = (decoded: ReadonlyArray<Effect.Effect.Success<ReturnType<typeof decode>>>) =>
    Effect.gen(function*() {
      const replies = yield* store.write(
        Effect.zipLeft(Effect.forEach(decoded, receiveOne), isolated(Faults.hit("receive:before-commit")))
      )
      if (replies.some((reply) => reply._tag === "Accepted")) yield* Faults.hit("receive:after-commit")
      return replies
    })

  const receive = (input: DeliveryInput) =>
    Effect.flatMap(decode(input, "receive"), (decoded) => Effect.map(receiveAll([decoded]), (replies) => replies[0]!))
      .pipe(Effect.withSpan("Inbox.receive"))

  const receiveBatch = (inputs: ReadonlyArray<DeliveryInput>) =>
    Effect.flatMap(Effect.forEach(inputs, (input) => decode(input, "receiveBatch")), receiveAll)
      .pipe(Effect.withSpan("Inbox.receiveBatch", { attributes: { size: inputs.length } }))

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

  return { receive, receiveBatch, receipts, progress, read }
}
