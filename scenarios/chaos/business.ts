/**
 * The chaos receiver's business: the sample counter (per-flow totals of `delta`) plus an
 * append-only effect log, both written inside the receipt's transaction. The log's
 * autoincrement order is the order in which effects were applied, so the checks can see a
 * duplicate effect (two rows for one event) or an out-of-order one (seq n+1 before n) directly,
 * independently of the inbox's own receipt and progress tables.
 */
import type { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Ref } from "effect"
import type { InboxBusiness } from "../../src/index.js"
import { Counter } from "../../src/index.js"

/** The counter business (no practical delta limit) plus the effect log. */
export const business = (): InboxBusiness => {
  const counter = Counter.business(Ref.unsafeMake(Number.MAX_SAFE_INTEGER))
  return {
    setup: (sql) =>
      Effect.gen(function*() {
        if (counter.setup) yield* counter.setup(sql)
        yield* sql`CREATE TABLE IF NOT EXISTS chaos_effect (
          n INTEGER PRIMARY KEY AUTOINCREMENT,
          event_id TEXT NOT NULL,
          flow_id TEXT NOT NULL,
          seq INTEGER NOT NULL,
          delta INTEGER NOT NULL)`
      }),
    apply: (delivery, sql) =>
      Effect.gen(function*() {
        const result = yield* counter.apply(delivery, sql)
        if (result._tag === "Applied") {
          const delta = (delivery.body as { readonly delta: number }).delta
          yield* sql`INSERT INTO chaos_effect (event_id, flow_id, seq, delta)
            VALUES (${delivery.eventId}, ${delivery.flowId}, ${delivery.seq}, ${delta})`
        }
        return result
      })
  }
}

/** One applied effect, in application order. */
export interface EffectRow {
  readonly n: number
  readonly eventId: string
  readonly flowId: string
  readonly seq: number
  readonly delta: number
}

/** The effect log in application order. */
export const effects = (sql: SqlClient): Effect.Effect<ReadonlyArray<EffectRow>, SqlError> =>
  Effect.map(
    sql<{ n: number; event_id: string; flow_id: string; seq: number; delta: number }>`SELECT * FROM chaos_effect ORDER BY n`,
    (rows) => rows.map((r) => ({ n: Number(r.n), eventId: r.event_id, flowId: r.flow_id, seq: Number(r.seq), delta: Number(r.delta) }))
  )

/** The events of a chaos run: F flows × E events, ids `flow-ff:s`, deltas 1..10. */
export const flowId = (f: number): string => `flow-${String(f).padStart(2, "0")}`
export const eventId = (f: number, seq: number): string => `${flowId(f)}:${seq}`
export const deltaOf = (f: number, seq: number): number => 1 + ((f * 7 + seq * 13) % 10)

/** A small deterministic PRNG, so a run's decisions follow its seed. */
export { prng } from "../support/prng.js"
