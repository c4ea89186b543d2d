/**
 * A store written before retention's index was keyed by `acked_at` alone (schema 8: the index
 * over acked events by state) is upgraded as it opens: the index is rebuilt, nothing stored
 * changes, and the prune finds the same acked events through it.
 */
import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect } from "effect"
import * as path from "node:path"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { execOn, latestMigration } from "../reliability/support/stores.js"
import { tempDir } from "../support/backends.js"

/** Acked events kept 100 ticks (milliseconds of the store's clock). */
const retention = { acked: 100, dedup: 1000 }

/**
 * Puts the file back to schema 8: the index as that schema made it, the columns later migrations
 * added dropped (their rebuilt tables are rebuilt again), those migrations unrecorded.
 */
const toSchema8 = (file: string) =>
  execOn(file, `DROP INDEX relay_event_acked;
    CREATE INDEX relay_event_acked ON relay_event (acked_at) WHERE state = 'acked';
    DROP INDEX relay_flow_paused;
    DROP INDEX relay_group_paused;
    ALTER TABLE relay_flow DROP COLUMN paused;
    ALTER TABLE relay_group DROP COLUMN paused;
    ALTER TABLE relay_settings DROP COLUMN version;
    ALTER TABLE relay_flow DROP COLUMN resume_seq;
    ALTER TABLE relay_flow DROP COLUMN resume_after;
    DELETE FROM relay_migrations WHERE migration_id >= 9;`)

const ackedIndexPredicate = (file: string): string => {
  const db = new Database(file, { fileMustExist: true, readonly: true })
  try {
    const row = db.prepare("SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'relay_event_acked'").get() as { sql: string }
    return row.sql.replace(/^.*\bWHERE\b/s, "").trim()
  } finally {
    db.close()
  }
}

describe("retention's index by acked_at", () => {
  it.scopedLive("a schema 8 store opens upgraded: the index rebuilt, its contents unchanged, the same events prunable", () =>
    Effect.gen(function*() {
      const file = path.join(yield* tempDir, "queue.db")
      const open = SqliteRelayQueue.make({ filename: file, policy: { leaseTicks: "1 hour" }, retention })
      const before = yield* Effect.scoped(Effect.gen(function*() {
        const queue = yield* open
        for (let i = 0; i < 30; i++) yield* queue.enqueue({ eventId: `e-${i}`, flowId: `f-${i % 6}`, body: { i } })
        for (const claimed of yield* queue.claimBatch(6)) yield* queue.settle(claimed.token, { _tag: "Accepted" })
        yield* queue.claimBatch(3)
        return yield* queue.snapshot
      }))
      toSchema8(file)
      expect(latestMigration(file, "relay_migrations")).toBe(8)
      expect(ackedIndexPredicate(file)).toBe("state = 'acked'")

      yield* Effect.scoped(Effect.gen(function*() {
        const queue = yield* open
        expect(latestMigration(file, "relay_migrations")).toBeGreaterThanOrEqual(9)
        expect(ackedIndexPredicate(file)).not.toMatch(/state/)
        expect(yield* queue.snapshot).toEqual(before)
        // The six acked events, once past their window.
        const acked = before.events.filter((e) => e.state === "acked").length
        expect(acked).toBe(6)
        yield* Effect.sleep("150 millis")
        expect((yield* queue.prune({ dryRun: true })).events).toBe(acked)
      }))
    }))
})
