/**
 * The seed's sample business: every body carries a positive integer `delta`, and the projection
 * keeps a running total per flow. Deltas above an adjustable limit are refused permanently with
 * `unsupported_delta` — the receiver's capability, which an operator can raise before a redrive.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Ref } from "effect"
import type { Delivery } from "../domain/Records.js"
import * as Inbox from "../services/Inbox.js"

/** Refusal code for a delta above the receiver's limit. */
export const UnsupportedDelta = "unsupported_delta"
/** Refusal code for a body without a positive integer delta. */
export const InvalidDelta = "invalid_delta"

const deltaOf = (body: unknown): number | undefined => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined
  const delta = "delta" in body ? body.delta : undefined
  return typeof delta === "number" && Number.isSafeInteger(delta) && delta > 0 ? delta : undefined
}

/**
 * The counter business, refusing deltas above the current value of `maxDelta`. Its steps are
 * generators made once (`Effect.fnUntraced`), as a receiver's hot path should be: a `function*`
 * made afresh for every delivery costs the collector far more than the step
 * (`node bench/generatorMaps.mjs`).
 */
export const business = (maxDelta: Ref.Ref<number>): Inbox.InboxBusiness => ({
  setup: (sql) =>
    Effect.asVoid(sql`CREATE TABLE IF NOT EXISTS counter_total (flow_id TEXT PRIMARY KEY, total BIGINT NOT NULL)`),
  apply: Effect.fnUntraced(function*(delivery: Delivery, sql: SqlClient) {
    const delta = deltaOf(delivery.body)
    if (delta === undefined) return Inbox.refuse(InvalidDelta)
    if (delta > (yield* Ref.get(maxDelta))) return Inbox.refuse(UnsupportedDelta)
    yield* sql`INSERT INTO counter_total (flow_id, total) VALUES (${delivery.flowId}, ${delta})
      ON CONFLICT (flow_id) DO UPDATE SET total = counter_total.total + ${delta}`
    return Inbox.applied
  }),
  // Deliveries of distinct flows: decide every refusal first, then one upsert for the rest.
  applyBatch: Effect.fnUntraced(function*(deliveries: ReadonlyArray<Delivery>, sql: SqlClient) {
    const limit = yield* Ref.get(maxDelta)
    const deltas = deliveries.map((delivery) => deltaOf(delivery.body))
    const results = deltas.map((delta) =>
      delta === undefined ? Inbox.refuse(InvalidDelta) : delta > limit ? Inbox.refuse(UnsupportedDelta) : Inbox.applied
    )
    const rows = deliveries.flatMap((delivery, i) =>
      results[i]!._tag === "Applied" ? [{ flow_id: delivery.flowId, total: deltas[i]! }] : []
    )
    if (rows.length > 0) {
      yield* sql`INSERT INTO counter_total ${sql.insert(rows)}
        ON CONFLICT (flow_id) DO UPDATE SET total = counter_total.total + excluded.total`
    }
    return results
  })
})

/** The per-flow totals of the projection. */
export const totals = (sql: SqlClient): Effect.Effect<ReadonlyMap<string, number>, SqlError> =>
  Effect.map(
    sql<{ flow_id: string; total: unknown }>`SELECT flow_id, total FROM counter_total ORDER BY flow_id`,
    (rows) => new Map(rows.map((row) => [row.flow_id, Number(row.total)]))
  )
