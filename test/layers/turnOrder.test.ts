/**
 * Turn order has one definition, `Protocol.compareTurn` (ascending `(served, flowId)`, ids by code
 * point): the SQL backend's `ORDER BY served, flow_id` must agree with it on every store — random served values with
 * ties, non-ASCII flow ids (astral and high-BMP characters, where UTF-16 order disagrees), and
 * flows that are due, not yet due, quarantined or drained.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc, Schema } from "effect"
import { EventId, FlowId } from "../../src/domain/Ids.js"
import type { NewEvent } from "../../src/domain/Operations.js"
import { compareTurn } from "../../src/domain/Protocol.js"
import type { EventRecord, FlowRecord } from "../../src/domain/Records.js"
import * as SqliteStore from "../../src/layers/internal/SqliteStore.js"
import * as QueueSchema from "../../src/layers/internal/QueueSchema.js"
import * as SqlRelayQueue from "../../src/layers/internal/SqlRelayQueue.js"
import type { QueueBackend } from "../../src/services/QueueBackend.js"

const now = 100

// Characters whose code point order and UTF-16 order disagree (U+FF01, U+FFFF vs astral), plus
// accents and CJK; `binary` adds any code point. Ids the domain refuses are filtered out.
const idCharacter = fc.oneof(
  fc.constantFrom("a", "b", "Z", "0", " ", "é", "中", "\uFF01", "\uFFFF", "😀", "𐀀", "\u{10FFFD}"),
  fc.string({ unit: "binary", minLength: 1, maxLength: 1 })
)
const flowIdArb = fc.string({ unit: idCharacter, minLength: 1, maxLength: 4 }).filter(Schema.is(FlowId))

/** When a flow's head becomes claimable: due, later, or never (quarantined head, or drained). */
const eligibility = fc.oneof(
  fc.record({ kind: fc.constant("due" as const), at: fc.integer({ min: 0, max: now }) }),
  fc.record({ kind: fc.constant("later" as const), at: fc.integer({ min: now + 1, max: 2 * now }) }),
  fc.record({ kind: fc.constantFrom("quarantined" as const, "drained" as const), at: fc.constant(null) })
)

// Few served values make ties (decided by flow id) common; large ones check BIGINT round trips.
const servedArb = fc.oneof(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 2 ** 40 }))

const flowsArb = fc.uniqueArray(fc.record({ flowId: flowIdArb, served: servedArb, eligibility }), {
  selector: (f) => f.flowId,
  maxLength: 25
})

type Spec = { readonly flowId: string; readonly served: number; readonly eligibility: { readonly kind: string; readonly at: number | null } }

/** The flows and their head events (a drained flow has none) that `specs` describe. */
const records = (specs: ReadonlyArray<Spec>) => {
  const flows: Array<FlowRecord> = []
  const heads: Array<NewEvent> = []
  for (const { eligibility: { at, kind }, flowId, served } of specs) {
    const id = FlowId.make(flowId)
    flows.push({ flowId: id, seq: 1, served, headSeq: kind === "drained" ? null : 1, eligibleAt: at, weight: 1, burst: 0, group: null })
    if (kind === "drained") continue
    const record: EventRecord = {
      eventId: EventId.make(`${flowId}#1`),
      flowId: id,
      seq: 1,
      body: { delta: 1 },
      state: kind === "quarantined" ? "quarantined" : "ready",
      nextAt: at ?? 0,
      leaseUntil: null,
      generation: 0,
      attempts: 0,
      lifetimeAttempts: 0,
      reason: kind === "quarantined" ? "refused" : null
    }
    heads.push({ record, bodyText: `{"delta":1}` })
  }
  return { flows, heads }
}

/** Stores `specs` in `backend` and reads the candidates (`limit` deep) and every flow in turn order. */
const orders = (backend: QueueBackend, specs: ReadonlyArray<Spec>, limit: number) => {
  const { flows, heads } = records(specs)
  return backend.write((tx) =>
    Effect.gen(function*() {
      yield* tx.putFlows(flows)
      yield* tx.insertEvents(heads)
      const candidates = yield* tx.candidates(now, limit)
      const all = yield* tx.listFlows({ order: "turn", limit: 10_000 })
      return { candidates, all }
    })
  )
}

const sqlite = Effect.map(SqliteStore.open({ filename: ":memory:" }, QueueSchema.migrations, QueueSchema.migrationsTable), SqlRelayQueue.backend)

const ids = (rows: ReadonlyArray<{ readonly flow: FlowRecord } | FlowRecord>) => rows.map((r) => ("flow" in r ? r.flow : r).flowId)

describe("turn order", () => {
  it.scoped.prop(
    "SQLite's candidates and flows in turn order are the flows sorted by Protocol.compareTurn",
    [flowsArb, fc.integer({ min: 1, max: 30 })],
    ([specs, limit]) =>
      Effect.gen(function*() {
        const { flows } = records(specs)
        const sorted = [...flows].sort(compareTurn)
        const due = sorted.filter((f) => f.eligibleAt !== null && f.eligibleAt <= now)
        const sql = yield* orders(yield* sqlite, specs, limit)
        expect(ids(sql.candidates)).toEqual(ids(due.slice(0, limit)))
        expect(ids(sql.all)).toEqual(ids(sorted))
        expect(ids((yield* orders(yield* sqlite, specs, 1)).candidates)).toEqual(ids(due.slice(0, 1)))
      }),
    { fastCheck: { numRuns: 200 } }
  )

  it.scoped("ids whose UTF-16 order differs from their code point order are still ordered by code point", () =>
    Effect.gen(function*() {
      const specs = ["\uFF01", "😀", "a", "\uFFFF"].map((flowId) => ({ flowId, served: 0, eligibility: { kind: "due", at: 0 } }))
      const { candidates } = yield* orders(yield* sqlite, specs, 10)
      expect(ids(candidates)).toEqual(["a", "\uFF01", "\uFFFF", "😀"])
      expect(ids(candidates)).not.toEqual([...ids(candidates)].sort())
    }))
})
