/**
 * The inbox over SQL, shared by every backend. A batch of deliveries is a few statements: the
 * receipts and progress it needs are read at once, decided in order, and written at once.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Clock, Effect, Either, Exit, Metric, Schema } from "effect"
import { InvalidInput } from "../../domain/Errors.js"
import { decodeInput, shorten } from "../../domain/Input.js"
import { canonicalize, parseStored } from "../../domain/Json.js"
import type { CanonicalBody } from "../../domain/Json.js"
import type { DeliveryReply } from "../../domain/Outcomes.js"
import { decideReceive } from "../../domain/Receiver.js"
import type { Incoming, Receipt } from "../../domain/Receiver.js"
import { Delivery } from "../../domain/Records.js"
import type { DeliveryInput } from "../../domain/Records.js"
import * as Faults from "../../services/Faults.js"
import { defaultInboxRetention } from "../../services/Inbox.js"
import type { ApplyResult, InboxBusiness, InboxPruneResult, InboxRetention, InboxService } from "../../services/Inbox.js"
import * as Metrics from "../../services/Metrics.js"
import { decodePruneOptions, PruneBatchSize } from "../../services/Retention.js"
import type { PruneOptions } from "../../services/Retention.js"
import { chunks, decodeRows, execWrite, idType, insertRows, isolated, limitTo, query, rowsTable, SqlInt } from "./Store.js"
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
  }),
  "2_inbox_retention": Effect.gen(function*() {
    const sql = yield* SqlClient
    // When a receipt was written (receipts written before are due at once: pruning them is safe,
    // see `pruned_through`).
    yield* sql`ALTER TABLE inbox_receipt ADD COLUMN received_at BIGINT NOT NULL DEFAULT 0`
    yield* sql`CREATE INDEX inbox_receipt_received ON inbox_receipt (received_at)`
    // The highest seq of the flow whose receipt was pruned: a re-delivery at or below it is a Duplicate.
    yield* sql`ALTER TABLE inbox_progress ADD COLUMN pruned_through BIGINT NOT NULL DEFAULT 0`
  })
}

/** Name of the inbox store's migrations table. */
export const migrationsTable = "inbox_migrations"

/** The inbox's row shapes (a receive reads a receipt and a progress row per delivery). */
export const inboxRows = {
  receipt: Schema.Struct({ event_id: Schema.String, flow_id: Schema.String, seq: SqlInt, body: Schema.String }),
  progress: Schema.Struct({ flow_id: Schema.String, last_seq: SqlInt, pruned_through: SqlInt }),
  due: Schema.Struct({ event_id: Schema.String, flow_id: Schema.String, seq: SqlInt }),
  count: Schema.Struct({ n: SqlInt })
}

const decodeInbox = {
  receipt: decodeRows(inboxRows.receipt),
  progress: decodeRows(inboxRows.progress),
  due: decodeRows(inboxRows.due),
  count: decodeRows(inboxRows.count)
}

// A refusal must roll back whatever the business step wrote before refusing.
class Refusal {
  readonly _tag = "Refusal"
  constructor(readonly code: string) {}
}

const decodeDelivery = { receive: decodeInput(Delivery, "receive"), receiveBatch: decodeInput(Delivery, "receiveBatch") }

interface Decoded {
  readonly delivery: Delivery
  readonly body: CanonicalBody
}

/** Builds the inbox service over an opened store, after the business step's own setup. */
export const make = (store: Store, business: InboxBusiness, retention?: InboxRetention): Effect.Effect<InboxService, SqlError> =>
  Effect.as(business.setup ? store.write(business.setup(store.client)) : Effect.void, service(store, business, retention ?? defaultInboxRetention))

const service = (store: Store, business: InboxBusiness, retention: InboxRetention): InboxService => {
  // The inbox's own statements are built with `sql`; the business step and `read` get the client,
  // whose statements run on the inbox's transaction.
  const { client, sql } = store

  // Per delivery: `flatMap`s rather than `Effect.gen`, a couple of runtime steps fewer.
  const decode = (input: DeliveryInput, operation: "receive" | "receiveBatch"): Effect.Effect<Decoded, InvalidInput> =>
    Effect.flatMap(decodeDelivery[operation](input), (delivery) =>
      Either.match(canonicalize(delivery.body, Number.MAX_SAFE_INTEGER), {
        onLeft: (message) => Effect.fail(new InvalidInput({ operation, message: shorten(message) })),
        onRight: (body) => Effect.succeed({ delivery, body })
      }))

  const incoming = ({ body, delivery }: Decoded): Incoming => ({
    eventId: delivery.eventId,
    flowId: delivery.flowId,
    seq: delivery.seq,
    bodyText: body.text,
    previousSeq: delivery.previousSeq
  })

  /** One business step in a savepoint of its own: a refusal rolls back what it wrote, and nothing else. */
  const applyOne = ({ body, delivery }: Decoded): Effect.Effect<ApplyResult, SqlError> =>
    client.withTransaction(
      Effect.flatMap(business.apply({ ...delivery, body: body.value }, client), (result) =>
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
  const receiveInTransaction = Effect.fnUntraced(function*(batch: ReadonlyArray<Decoded>) {
    const ids = [...new Set(batch.map((d) => d.delivery.eventId))]
    const flows = [...new Set(batch.map((d) => d.delivery.flowId))]
    const receipts = sql`SELECT event_id, flow_id, seq, body FROM inbox_receipt WHERE event_id IN ${sql.in(ids)}`
    const progressOf = yield* query(
      store,
      sql`SELECT flow_id, last_seq, pruned_through FROM inbox_progress WHERE flow_id IN ${sql.in(flows)}`,
      decodeInbox.progress
    )
    const stored = new Map(
      (yield* query(store, receipts, decodeInbox.receipt))
        .map((r): [string, Receipt] => [r.event_id, { eventId: r.event_id, flowId: r.flow_id, seq: r.seq, bodyText: r.body }])
    )
    const last = new Map(progressOf.map((r): [string, number] => [r.flow_id, r.last_seq]))
    const pruned = new Map(progressOf.map((r): [string, number] => [r.flow_id, r.pruned_through]))
    const accepted: Array<Receipt> = []
    const replies: Array<DeliveryReply> = []
    const { applyBatch } = business
    const together = applyBatch !== undefined && ids.length === batch.length && flows.length === batch.length
    const decide = (receipt: Receipt) =>
      decideReceive(receipt, stored.get(receipt.eventId), last.get(receipt.flowId) ?? 0, pruned.get(receipt.flowId) ?? 0)
    const decisions = together ? batch.map((d) => decide(incoming(d))) : []
    const toApply = batch.filter((_, i) => decisions[i]?._tag === "Apply")
    const results = together && toApply.length > 0 ? yield* applyBatch(toApply.map(({ body, delivery }) => ({ ...delivery, body: body.value })), client) : []
    let next = 0
    for (const [i, d] of batch.entries()) {
      const receipt = incoming(d)
      const decision = decisions[i] ?? decide(receipt)
      if (decision._tag === "Reply") {
        replies.push(decision.reply)
        continue
      }
      const result = together ? results[next++]! : yield* applyOne(d)
      if (result._tag === "Refused") {
        replies.push({ _tag: "Rejected", code: result.code })
        continue
      }
      stored.set(receipt.eventId, receipt)
      last.set(receipt.flowId, receipt.seq)
      accepted.push(receipt)
      replies.push({ _tag: "Accepted" })
    }
    if (accepted.length > 0) {
      const receivedAt = yield* Clock.currentTimeMillis
      const columns = ["event_id", "flow_id", "seq", "body", "received_at"]
      const rows = accepted.map((r) => ({ event_id: r.eventId, flow_id: r.flowId, seq: r.seq, body: r.bodyText, received_at: receivedAt }))
      for (const part of chunks(rows, columns.length)) {
        yield* execWrite(store, sql`INSERT INTO inbox_receipt (event_id, flow_id, seq, body, received_at)
          ${insertRows(sql, "inbox_receipt", columns, part)}`)
      }
      const progress = [...new Map(accepted.map((r) => [r.flowId, r.seq]))].map(([flow_id, last_seq]) => ({ flow_id, last_seq }))
      for (const part of chunks(progress, 2)) {
        yield* execWrite(store, sql`INSERT INTO inbox_progress (flow_id, last_seq) ${insertRows(sql, "inbox_progress", ["flow_id", "last_seq"], part)}
          ON CONFLICT (flow_id) DO UPDATE SET last_seq = excluded.last_seq`)
      }
    }
    return replies
  })

  /** Receives decoded deliveries in one transaction, with the fault points around its commit. */
  const receiveAll = (decoded: ReadonlyArray<Decoded>): Effect.Effect<ReadonlyArray<DeliveryReply>, SqlError> =>
    decoded.length === 0
      ? Effect.succeed([])
      : Faults.whenInstalled(store.write(receiveInTransaction(decoded)), (faults) =>
        Effect.gen(function*() {
          const replies = yield* store.write(Effect.zipLeft(receiveInTransaction(decoded), isolated(faults.hit("receive:before-commit"))))
          if (replies.some((reply) => reply._tag === "Accepted")) yield* faults.hit("receive:after-commit")
          return replies
        }))

  const receive = (input: DeliveryInput) =>
    Effect.flatMap(decode(input, "receive"), (decoded) => Effect.map(receiveAll([decoded]), (replies) => replies[0]!))
      .pipe(Metrics.withHotSpan("Inbox.receive"))

  const receiveBatch = (inputs: ReadonlyArray<DeliveryInput>) =>
    Effect.flatMap(Effect.forEach(inputs, (input) => decode(input, "receiveBatch")), receiveAll)
      .pipe(Metrics.withHotSpan("Inbox.receiveBatch", { attributes: { size: inputs.length } }))

  const receiptsRead = store.read(
    query(store, sql`SELECT * FROM inbox_receipt ORDER BY flow_id, seq`, (rows) =>
      Exit.map(decodeInbox.receipt(rows), (decoded) =>
        decoded.map((row) => ({ eventId: row.event_id, flowId: row.flow_id, seq: row.seq, body: parseStored(row.body) }))))
  )

  const progress = store.read(
    query(store, sql`SELECT flow_id, last_seq, pruned_through FROM inbox_progress ORDER BY flow_id`, (rows) =>
      Exit.map(decodeInbox.progress(rows), (decoded) => new Map(decoded.map((row) => [row.flow_id, row.last_seq]))))
  )

  const read = <A, E>(body: (sql: SqlClient) => Effect.Effect<A, E>) => store.read(body(client))

  /**
   * One prune batch: up to `size` receipts received at or before `cutoff` are deleted, and each
   * flow's `pruned_through` is raised to the highest seq deleted (progress itself stays).
   */
  const pruneBatch = (cutoff: number, size: number) =>
    store.write(Effect.gen(function*() {
      const due = yield* query(
        store,
        sql`SELECT event_id, flow_id, seq FROM inbox_receipt WHERE received_at <= ${cutoff} ORDER BY received_at ${limitTo(sql, size)}`,
        decodeInbox.due
      )
      if (due.length === 0) return 0
      const through = new Map<string, number>()
      for (const r of due) through.set(r.flow_id, Math.max(through.get(r.flow_id) ?? 0, r.seq))
      const marks = [...through].map(([flow_id, seq]) => ({ flow_id, last_seq: seq }))
      // Writes nobody reads: on PostgreSQL they go with COMMIT, one round trip for the batch's writes.
      for (const part of chunks(marks, 2)) {
        yield* execWrite(store, sql`UPDATE inbox_progress SET pruned_through = v.last_seq
          FROM ${rowsTable(sql, "inbox_progress", ["flow_id", "last_seq"], part)}
          WHERE inbox_progress.flow_id = v.flow_id AND inbox_progress.pruned_through < v.last_seq`)
      }
      for (const part of chunks(due, 1)) {
        yield* execWrite(store, sql`DELETE FROM inbox_receipt WHERE event_id IN ${sql.in(part.map((r) => r.event_id))}`)
      }
      return due.length
    }))

  const prune = (options?: PruneOptions): Effect.Effect<InboxPruneResult, InvalidInput | SqlError> =>
    Effect.flatMap(decodePruneOptions(options, "Inbox.prune"), ({ dryRun, limit }) =>
      Effect.gen(function*() {
        if (retention.receipts === null) return { receipts: 0, dryRun }
        const cutoff = (yield* Clock.currentTimeMillis) - retention.receipts
        if (dryRun) {
          const [row] = yield* store.read(query(
            store,
            sql`SELECT COUNT(*) AS n FROM (SELECT 1 AS one FROM inbox_receipt WHERE received_at <= ${cutoff} ${limitTo(sql, limit)}) AS due`,
            decodeInbox.count
          ))
          return { receipts: row?.n ?? 0, dryRun }
        }
        let done = 0
        for (;;) {
          const size = Math.min(PruneBatchSize, limit - done)
          const n = yield* pruneBatch(cutoff, size)
          done += n
          if (n < size || done >= limit) break
        }
        yield* Metric.incrementBy(Metrics.prunedByKind.receipts, done)
        return { receipts: done, dryRun }
      })).pipe(Effect.withSpan("Inbox.prune"))

  return { receive, receiveBatch, receipts: receiptsRead, progress, read, retention, prune }
}
