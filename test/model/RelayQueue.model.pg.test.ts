/**
 * The model-based test (see `RelayQueue.model.test.ts`) on PostgreSQL with exact claims, when
 * FAIR_RELAY_PG_URL names a database (`.ci/run` sets it; otherwise reported as skipped). One fresh
 * schema per chunk, put back to the freshly migrated state before each sequence. It runs
 * FAIR_RELAY_MODEL_PG_RUNS sequences: by default 250 — fewer than SQLite's 1,000, as each command
 * is a few transactions plus a snapshot (1,000 took 133 s on a quiet 2-core machine) — and as
 * many as SQLite when FAIR_RELAY_MODEL_RUNS is set and FAIR_RELAY_MODEL_PG_RUNS is not.
 * `RelayQueue.model.pg-parallel.test.ts` runs the same with parallel claims: two files, so that
 * vitest runs them in two workers at once.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { seedPolicy } from "../../src/domain/Policy.js"
import * as PgRelayQueue from "../../src/layers/PgRelayQueue.js"
import * as TickClock from "../../src/services/TickClock.js"
import { pgUrl } from "../support/backends.js"
import { pgQueueSchema, postgres } from "./backends.js"
import { modelSuite, onlyBackend, pgRuns } from "./suite.js"

if (pgUrl === undefined) {
  describe("RelayQueue (postgres) against the reference model", () => {
    it.skip("skipped: FAIR_RELAY_PG_URL is not set", () => {})
  })
} else {
  modelSuite(postgres(pgUrl), pgRuns)
}

describe.skipIf(pgUrl === undefined || (onlyBackend !== undefined && onlyBackend !== "postgres"))("the PostgreSQL reset between sequences", () => {
  it("leaves exactly what a freshly migrated schema holds: rows, clock row and sequences", () =>
    Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const used = yield* pgQueueSchema(pgUrl!)
      const untouched = yield* pgQueueSchema(pgUrl!)
      yield* Effect.scoped(Effect.gen(function*() {
        const q = yield* PgRelayQueue.make({ url: used.url, policy: seedPolicy, maxConnections: 1 })
        yield* q.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        yield* q.enqueue({ eventId: "B1", flowId: "B", body: { delta: 1 }, weight: 2 })
        const claimed = yield* q.claim
        if (claimed._tag !== "Claimed") return expect.fail("expected a claim")
        yield* q.settle(claimed.token, { _tag: "Rejected", code: "refused" })
        yield* q.redrive({ eventId: claimed.event.eventId, expectedGeneration: 1, reason: "fixed" })
      })).pipe(Effect.withClock(TickClock.make(7).clock))
      const dirty = yield* used.contents
      expect(dirty).not.toEqual(untouched.fresh)
      yield* used.reset
      expect(yield* used.contents).toEqual(yield* untouched.contents)
      expect(untouched.fresh.tables.relay_clock).toEqual([{ id: 1, tick: 0, ticket: 0 }])
    }))))
})
