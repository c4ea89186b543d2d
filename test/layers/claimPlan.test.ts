/**
 * The claim path never scans the event table: every statement it really issues (captured from
 * the `sql.execute` spans) is planned by SQLite as an index search, whatever the backlog. Nor
 * does retention's prune: it reads acked events through their index by `acked_at`.
 */
import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { seedPolicy } from "../../src/domain/Policy.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { captureSql } from "../../scenarios/support/captureSql.js"
import { tempDir } from "../support/backends.js"
import { testTmpDir } from "../support/tmp.js"

const explain = (file: string, statement: string): ReadonlyArray<string> => {
  const db = new Database(file, { readonly: true })
  try {
    const prepared = db.prepare(`EXPLAIN QUERY PLAN ${statement}`)
    const params = Array.from({ length: (statement.match(/\?/g) ?? []).length }, () => null)
    return prepared.all(...params).map((row) => (row as { detail: string }).detail)
  } finally {
    db.close()
  }
}

/**
 * A store of 50 flows × 20 events; with `grouped`, 40 of the flows in 4 groups (the rest of none),
 * so the claim walks groups, a group's flows and flows of no group.
 */
const planOf = (grouped: boolean) =>
  Effect.gen(function*() {
    const dir = yield* Effect.acquireRelease(
      Effect.sync(() => fs.mkdtempSync(path.join(testTmpDir(), "fair-relay-plan-"))),
      (d) => Effect.sync(() => fs.rmSync(d, { recursive: true, force: true }))
    )
    const file = path.join(dir, "queue.db")
    const queue = yield* SqliteRelayQueue.make({ filename: file, policy: seedPolicy })
    for (let f = 0; f < 50; f++) {
      // Group ids sort before the flow ids: the first claims (all turns at 0) are in groups.
      const group = grouped && f < 40 ? { group: `a-tenant-${f % 4}` } : {}
      for (let i = 0; i < 20; i++) yield* queue.enqueue({ eventId: `e-${f}-${i}`, flowId: `f-${f}`, body: { i }, ...group })
    }
    const [claimed, claimSql] = yield* captureSql(queue.claim)
    const [batch, batchSql] = yield* captureSql(queue.claimBatch(8))
    expect(claimed._tag).toBe("Claimed")
    expect(batch).toHaveLength(8)
    const token = claimed._tag === "Claimed" ? claimed.token : { eventId: "", generation: 0 }
    const [, settleSql] = yield* captureSql(queue.settle(token, { _tag: "Accepted" }))
    const statements = [...claimSql, ...batchSql, ...settleSql].filter((s) => /^\s*(SELECT|UPDATE)/i.test(s))
    return { file, statements }
  })

describe("claim query plan", () => {
  for (const grouped of [false, true]) {
    it.scoped(`claim, claimBatch and settle search indexes and never scan events or sort (${grouped ? "flows in groups" : "no groups"})`, () =>
      Effect.gen(function*() {
        const { file, statements } = yield* planOf(grouped)
        expect(statements.some((s) => /FROM relay_flow/.test(s) && /ORDER BY (f\.)?served/.test(s))).toBe(true)
        expect(statements.some((s) => /UPDATE relay_event/.test(s))).toBe(true)
        if (grouped) expect(statements.some((s) => /UPDATE relay_group/.test(s))).toBe(true)
        for (const statement of statements) {
          const plan = explain(file, statement)
          expect(plan.length, statement).toBeGreaterThan(0)
          for (const step of plan) {
            expect(step, statement).not.toMatch(/^SCAN relay_event/)
            expect(step, statement).not.toMatch(/TEMP B-TREE/)
            // The walks: flows of no group, a group's flows, groups — each an ordered index.
            if (/^SCAN (relay_flow|f)\b/.test(step)) expect(step, statement).toMatch(/USING (COVERING )?INDEX relay_flow_(group_)?turn/)
            if (/^SCAN relay_group\b/.test(step)) expect(step, statement).toMatch(/USING (COVERING )?INDEX relay_group_turn/)
          }
        }
      }))
  }

  it.scoped("a prune reads acked events through the acked index, without scanning the events or sorting", () =>
    Effect.gen(function*() {
      const file = path.join(yield* tempDir, "queue.db")
      const queue = yield* SqliteRelayQueue.make({ filename: file, policy: seedPolicy, retention: { acked: 100, dedup: 1000 } })
      for (let i = 0; i < 40; i++) yield* queue.enqueue({ eventId: `e-${i}`, flowId: `f-${i % 8}`, body: { i } })
      for (const claimed of yield* queue.claimBatch(8)) yield* queue.settle(claimed.token, { _tag: "Accepted" })
      const [, dryRun] = yield* captureSql(queue.prune({ dryRun: true }))
      const [, prune] = yield* captureSql(queue.prune())
      const reads = [...dryRun, ...prune].filter((s) => /FROM relay_event\b/.test(s) && /acked_at <=/.test(s))
      expect(reads.length, [...dryRun, ...prune].join("\n")).toBeGreaterThanOrEqual(2)
      for (const statement of reads) {
        const plan = explain(file, statement)
        expect(plan.some((step) => /^SEARCH relay_event USING (COVERING )?INDEX relay_event_acked\b/.test(step)), `${statement}\n${plan.join("\n")}`).toBe(true)
        for (const step of plan) {
          expect(step, statement).not.toMatch(/^SCAN relay_event/)
          expect(step, statement).not.toMatch(/TEMP B-TREE/)
        }
      }
    }))
})
