/**
 * The inbox over SQL, shared by every backend. A batch of deliveries is a few statements: the
 * receipts and progress it needs are read at once, decided in order, and written at once.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Either, Schema } from "effect"
import { InvalidInput } from "../../domain/Errors.js"
import { decodeInput, shorten } from "../../domain/Input.js"
import { canonicalize, parseStored } from "../../domain/Json.js"
import type { CanonicalBody } from "../../domain/Json.js"
import type { DeliveryReply } from "../../domain/Outcomes.js"
import { decideReceive } from "../../domain/Receiver.js"
import type { Receipt } from "../../domain/Receiver.js"
import { Delivery } from "../../domain/Records.js"
import type { DeliveryInput } from "../../domain/Records.js"
import * as Faults from "../../services/Faults.js"
import type { ApplyResult, InboxBusiness, InboxService } from "../../services/Inbox.js"
import { chunks, decodeRows, idType, isolated, rowsTable, SqlInt } from "./Store.js"
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

const receipts = decodeRows(Schema.Struct({ event_id: Schema.String, flow_id: Schema.String, seq: SqlInt, body: Schema.String }))
const progressRows = decodeRows(Schema.Struct({ flow_id: Schema.String, last_seq: SqlInt }))

// A refusal must roll back whatever the business step wrote before refusing.
class Refusal {
  readonly _tag = "Refusal"
  constructor(readonly code: string) {}
}

interface Decoded {
  readonly delivery: Delivery
  readonly body: CanonicalBody
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

  const incoming = ({ body, delivery }: Decoded): Receipt => ({
    eventId: delivery.eventId,
    flowId: delivery.flowId,
    seq: delivery.seq,
    bodyText: body.text
  })

  /** One business step in a savepoint of its own: a refusal rolls back what it wrote, and nothing else. */
  const applyOne = ({ body, delivery }: Decoded): Effect.Effect<ApplyResult, SqlError> =>
    sql.withTransaction(
      Effect.flatMap(business.apply({ ...delivery, body: body.value }, sql), (result) =>
        result._tag === "Refused" ? Effect.fail(new Refusal(result.code)) : Effect.succeed(result))
    ).pipe(
      Effect.catchIf((error): error is Refusal => error instanceof Refusal, (refusal) => Effect.succeed<ApplyResult>({
        _tag: "Refused",
        code: refusal.code
      }))
    )

  /**
   * Receives deliveries in order inside the store's write transaction: each is decided against
   * the receipts and progress stored before it and those of the batch's earlier deliveries.
   * With a business `applyBatch` and no two deliveries of one flow or id (a relay's batches hold
   * one head per flow), every decision is independent and the steps run as one call.
   */
  const receiveInTransaction = (batch: ReadonlyArray<Decoded>) =>
    Effect.gen(function*() {
      const ids = [...new Set(batch.map((d) => d.delivery.eventId))]
      const flows = [...new Set(batch.map((d) => d.delivery.flowId))]
      const stored = new Map(
        (yield* Effect.flatMap(store.exec(sql`SELECT event_id, flow_id, seq, body FROM inbox_receipt WHERE event_id IN ${sql.in(ids)}`), receipts))
          .map((r): [string, Receipt] => [r.event_id, { eventId: r.event_id, flowId: r.flow_id, seq: r.seq, bodyText: r.body }])
      )
      const last = new Map(
        (yield* Effect.flatMap(store.exec(sql`SELECT flow_id, last_seq FROM inbox_progress WHERE flow_id IN ${sql.in(flows)}`), progressRows))
          .map((r): [string, number] => [r.flow_id, r.last_seq])
      )
      const accepted: Array<Receipt> = []
      const replies: Array<DeliveryReply> = []
      const { applyBatch } = business
      if (applyBatch !== undefined && ids.length === batch.length && flows.length === batch.length) {
        const decisions = batch.map((d) => decideReceive(incoming(d), stored.get(d.delivery.eventId), last.get(d.delivery.flowId) ?? 0))
        const toApply = batch.filter((_, i) => decisions[i]!._tag === "Apply")
        const results = toApply.length === 0 ? [] : yield* applyBatch(toApply.map(({ body, delivery }) => ({ ...delivery, body: body.value })), sql)
        let next = 0
        batch.forEach((d, i) => {
          const decision = decisions[i]!
          if (decision._tag === "Reply") return replies.push(decision.reply)
          const result = results[next++]!
          if (result._tag === "Refused") return replies.push({ _tag: "Rejected", code: result.code })
          accepted.push(incoming(d))
          replies.push({ _tag: "Accepted" })
        })
      } else {
        for (const d of batch) {
          const receipt = incoming(d)
          const decision = decideReceive(receipt, stored.get(receipt.eventId), last.get(receipt.flowId) ?? 0)
          if (decision._tag === "Reply") {
            replies.push(decision.reply)
            continue
          }
          const result = yield* applyOne(d)
          if (result._tag === "Refused") {
            replies.push({ _tag: "Rejected", code: result.code })
            continue
          }
          stored.set(receipt.eventId, receipt)
          last.set(receipt.flowId, receipt.seq)
          accepted.push(receipt)
          replies.push({ _tag: "Accepted" })
        }
      }
      if (accepted.length > 0) {
        const columns = ["event_id", "flow_id", "seq", "body"]
        const rows = accepted.map((r) => ({ event_id: r.eventId, flow_id: r.flowId, seq: r.seq, body: r.bodyText }))
        for (const part of chunks(rows, columns.length)) {
          yield* store.exec(sql`INSERT INTO inbox_receipt (event_id, flow_id, seq, body) SELECT v.event_id, v.flow_id, v.seq, v.body
            FROM ${rowsTable(sql, "inbox_receipt", columns, part)}`)
        }
        const progress = [...new Map(accepted.map((r) => [r.flowId, r.seq]))].map(([flow_id, last_seq]) => ({ flow_id, last_seq }))
        for (const part of chunks(progress, 2)) {
          // `WHERE true` tells SQLite's parser that ON CONFLICT belongs to the INSERT, not a join.
          yield* store.exec(sql`INSERT INTO inbox_progress (flow_id, last_seq) SELECT v.flow_id, v.last_seq
            FROM ${rowsTable(sql, "inbox_progress", ["flow_id", "last_seq"], part)}
            WHERE true ON CONFLICT (flow_id) DO UPDATE SET last_seq = excluded.last_seq`)
        }
      }
      return replies
    })

  /** Receives decoded deliveries in one transaction, with the fault points around its commit. */
  const receiveAll = (decoded: ReadonlyArray<Decoded>) =>
    Effect.gen(function*() {
      if (decoded.length === 0) return []
      const replies = yield* store.write(Effect.zipLeft(receiveInTransaction(decoded), isolated(Faults.hit("receive:before-commit"))))
      if (replies.some((reply) => reply._tag === "Accepted")) yield* Faults.hit("receive:after-commit")
      return replies
    })

  const receive = (input: DeliveryInput) =>
    Effect.flatMap(decode(input, "receive"), (decoded) => Effect.map(receiveAll([decoded]), (replies) => replies[0]!))
      .pipe(Effect.withSpan("Inbox.receive"))

  const receiveBatch = (inputs: ReadonlyArray<DeliveryInput>) =>
    Effect.flatMap(Effect.forEach(inputs, (input) => decode(input, "receiveBatch")), receiveAll)
      .pipe(Effect.withSpan("Inbox.receiveBatch", { attributes: { size: inputs.length } }))

  const receiptsRead = store.read(
    Effect.map(Effect.flatMap(store.exec(sql`SELECT * FROM inbox_receipt ORDER BY flow_id, seq`), receipts), (rows) =>
      rows.map((row) => ({ eventId: row.event_id, flowId: row.flow_id, seq: row.seq, body: parseStored(row.body) })))
  )

  const progress = store.read(
    Effect.map(
      Effect.flatMap(store.exec(sql`SELECT flow_id, last_seq FROM inbox_progress ORDER BY flow_id`), progressRows),
      (rows) => new Map(rows.map((row) => [row.flow_id, row.last_seq]))
    )
  )

  const read = <A, E>(query: (sql: SqlClient) => Effect.Effect<A, E>) => store.read(query(sql))

  return { receive, receiveBatch, receipts: receiptsRead, progress, read }
}
