/**
 * The seed's sample business: every body carries a positive integer `delta`, and the projection
 * keeps a running total per flow. Deltas above an adjustable limit are refused permanently with
 * `unsupported_delta` — the receiver's capability, which an operator can raise before a redrive.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Ref } from "effect"
import * as Inbox from "../services/Inbox.js"

/** Refusal code for a delta above the receiver's limit. */
export const UnsupportedDelta = "unsupported_delta"
/** Refusal code for a body without a positive integer delta. */
export const InvalidDelta = "invalid_delta"

const deltaOf = (body: unknown): number | undefined => {
  if (typeof body !== "object" || body === null || Array.isArray(body)) return undefined
  const delta = (body as { readonly delta?: unknown }).delta
  return typeof delta === "number" && Number.isSafeInteger(delta) && delta > 0 ? delta : undefined
}

/** The counter business, refusing deltas above the current value of `maxDelta`. */
export const business = (maxDelta: Ref.Ref<number>): Inbox.InboxBusiness => ({
  setup: (sql) =>
    Effect.asVoid(sql`CREATE TABLE IF NOT EXISTS counter_total (flow_id TEXT PRIMARY KEY, total BIGINT NOT NULL)`),
  apply: (delivery, sql) =>
    Effect.gen(function*() {
      const delta = deltaOf(delivery.body)
      if (delta === undefined) return Inbox.refuse(InvalidDelta)
      if (delta > (yield* Ref.get(maxDelta))) return Inbox.refuse(UnsupportedDelta)
      yield* sql`INSERT INTO counter_total (flow_id, total) VALUES (${delivery.flowId}, ${delta})
        ON CONFLICT (flow_id) DO UPDATE SET total = counter_total.total + ${delta}`
      return Inbox.applied
    })
})

/** The per-flow totals of the projection. */
export const totals = (sql: SqlClient): Effect.Effect<ReadonlyMap<string, number>, SqlError> =>
  Effect.map(
    sql<{ flow_id: string; total: unknown }>`SELECT flow_id, total FROM counter_total ORDER BY flow_id`,
    (rows) => new Map(rows.map((row) => [row.flow_id, Number(row.total)]))
  )
