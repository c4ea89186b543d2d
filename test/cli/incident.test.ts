/**
 * Operating through an incident with the real bin: 500 heads quarantined across 500 flows of 5
 * groups (each flow's first event refused, a second behind it); one `redrive-all --group` releases
 * a group's 100 with one audit row each, and each of those flows then goes on in order; a run
 * SIGKILLed after its first page and run again redrives every head exactly once. `discard`,
 * `pause` and `resume`, and what `status`, `flows` and `groups` show of them.
 */
import Database from "better-sqlite3"
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import type { RelayQueueService } from "../../src/services/RelayQueue.js"
import { bin, tempDir } from "./support.js"

const dir = tempDir("incident")
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

const Groups = 5
const FlowsPerGroup = 100

/** Every flow `g<g>-f<f>` of group `g<g>` with two events, the first refused (quarantined with reason `bad-<g>`). */
const incident = (queue: RelayQueueService) =>
  Effect.gen(function*() {
    const inputs = []
    for (let g = 0; g < Groups; g++) {
      for (let f = 0; f < FlowsPerGroup; f++) {
        for (const e of [1, 2]) inputs.push({ eventId: `g${g}-f${f}-${e}`, flowId: `g${g}-f${f}`, group: `g${g}`, body: { e } })
      }
    }
    yield* queue.enqueueBatch(inputs)
    for (;;) {
      const claims = yield* queue.claimBatch(1000)
      if (claims.length === 0) break
      yield* queue.settleBatch(claims.map((c) => ({ token: c.token, reply: { _tag: "Rejected" as const, code: `bad-${c.event.flowId[1]}` } })))
    }
  })

const withQueue = <A>(file: string, body: (queue: RelayQueueService) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(SqliteRelayQueue.make({ filename: file, policy: { leaseTicks: 60_000 } }), body)))

const sqlOn = (file: string, statements: string) => {
  const db = new Database(file, { fileMustExist: true })
  try {
    db.exec(statements)
  } finally {
    db.close()
  }
}

const auditOf = (file: string) => {
  const db = new Database(file, { fileMustExist: true, readonly: true })
  try {
    return db.prepare("SELECT event_id, action, actor, reason FROM relay_audit ORDER BY id").all() as Array<
      { event_id: string | null; action: string; actor: string | null; reason: string }
    >
  } finally {
    db.close()
  }
}

describe("redrive-all", () => {
  it("one command redrives one group's 100 quarantined heads, one audit row each; each flow then delivers in order", async () => {
    const file = path.join(dir, "bulk.db")
    await withQueue(file, incident)
    const dry = await bin(["redrive-all", "--db", file, "--group", "g1", "--reason", "receiver fixed", "--dry-run", "--json"])
    expect(dry.code, dry.stderr).toBe(0)
    expect(JSON.parse(dry.stdout)).toMatchObject({ dryRun: true, heads: expect.any(Array) })
    expect(JSON.parse(dry.stdout).heads).toHaveLength(100)
    expect(auditOf(file)).toEqual([])

    const ran = await bin(["redrive-all", "--db", file, "--group", "g1", "--reason", "receiver fixed", "--by", "ops"])
    expect(ran.code, ran.stderr).toBe(0)
    expect(ran.stdout).toContain("100 heads redriven in 1 transaction (by ops: receiver fixed)")
    const audit = auditOf(file)
    expect(audit).toHaveLength(100)
    expect(new Set(audit.map((row) => row.event_id))).toEqual(new Set(Array.from({ length: 100 }, (_, f) => `g1-f${f}-1`)))
    expect(audit.every((row) => row.action === "redrive" && row.actor === "ops" && row.reason === "receiver fixed")).toBe(true)

    const delivered = await withQueue(file, (queue) =>
      Effect.gen(function*() {
        const order: Array<string> = []
        for (;;) {
          const claims = yield* queue.claimBatch(64)
          if (claims.length === 0) return order
          order.push(...claims.map((c) => c.event.eventId))
          yield* queue.settleBatch(claims.map((c) => ({ token: c.token, reply: { _tag: "Accepted" as const } })))
        }
      }))
    expect(delivered).toHaveLength(200)
    for (let f = 0; f < FlowsPerGroup; f++) expect(delivered.filter((id) => id.startsWith(`g1-f${f}-`))).toEqual([`g1-f${f}-1`, `g1-f${f}-2`])
    const stats = await withQueue(file, (queue) => queue.stats)
    expect(stats.byState).toMatchObject({ quarantined: 400, acked: 200 })
  }, 120_000)

  it("SIGKILLed mid-run and run again, it redrives every head of the group exactly once", async () => {
    const file = path.join(dir, "killed.db")
    await withQueue(file, incident)
    const args = ["redrive-all", "--db", file, "--group", "g2", "--reason", "receiver fixed", "--page-size", "1"]
    // Each audit row costs a join of a million rows (a trigger of this test's own), so the run's
    // 100 pages take seconds and the kill lands after its first page, whatever the machine's load.
    sqlOn(file, `CREATE TABLE slow (x INTEGER);
      WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 1000) INSERT INTO slow SELECT x FROM n;
      CREATE TABLE sink (n INTEGER);
      CREATE TRIGGER slow_audit AFTER INSERT ON relay_audit BEGIN INSERT INTO sink SELECT COUNT(*) FROM slow a, slow b; END;`)
    const killed = await bin(args, {
      started: (child) => {
        child.stdout!.on("data", (chunk: string) => {
          if (String(chunk).includes("redriven")) child.kill("SIGKILL")
        })
      }
    })
    expect(killed.signal).toBe("SIGKILL")
    sqlOn(file, "DROP TRIGGER slow_audit")
    const partial = auditOf(file).length
    expect(partial).toBeGreaterThanOrEqual(1)
    expect(partial).toBeLessThan(100)

    const again = await bin(args)
    expect(again.code, again.stderr).toBe(0)
    expect(again.stdout).toContain(`${100 - partial} head${100 - partial === 1 ? "" : "s"} redriven`)
    const audit = auditOf(file)
    expect(audit).toHaveLength(100)
    expect(new Set(audit.map((row) => row.event_id)).size).toBe(100)
    const snapshot = await withQueue(file, (queue) => queue.snapshot)
    const g2 = snapshot.events.filter((e) => e.flowId.startsWith("g2-") && e.seq === 1)
    expect(g2.every((e) => e.state === "ready" && e.generation === 2)).toBe(true)
  }, 120_000)

  it("refuses to run without a filter, changing nothing", async () => {
    const file = path.join(dir, "nofilter.db")
    await withQueue(file, (queue) => queue.enqueue({ eventId: "A1", flowId: "A", body: {} }))
    const ran = await bin(["redrive-all", "--db", file, "--reason", "x"])
    expect(ran.code).toBe(2)
    expect(ran.stderr).toContain("needs a filter")
  })
})

describe("discard, pause and resume", () => {
  it("discard takes a quarantined head out; pause and resume show in status, flows and groups, and in the audit", async () => {
    const file = path.join(dir, "ops.db")
    await withQueue(file, (queue) =>
      Effect.gen(function*() {
        yield* queue.enqueueBatch([
          { eventId: "A1", flowId: "A", group: "T", body: {} },
          { eventId: "A2", flowId: "A", group: "T", body: {} }
        ])
        const claimed = yield* queue.claim
        if (claimed._tag !== "Claimed") return yield* Effect.dieMessage("expected a claim")
        yield* queue.settle(claimed.token, { _tag: "Rejected", code: "poison" })
      }))
    const wrong = await bin(["discard", "A1", "--db", file, "--generation", "7", "--reason", "poison"])
    expect(wrong.code).toBe(1)
    expect(wrong.stderr).toContain("GenerationMismatch")
    const discarded = await bin(["discard", "A1", "--db", file, "--generation", "1", "--reason", "poison pill", "--by", "ops"])
    expect(discarded.code, discarded.stderr).toBe(0)
    expect(discarded.stdout).toContain("discarded A1: generation 1 → 2, never to be delivered; its flow goes on from A2 (by ops: poison pill)")

    const paused = await bin(["pause", "--db", file, "--group", "T", "--reason", "tenant T down", "--by", "ops"])
    expect(paused.code, paused.stderr).toBe(0)
    expect(paused.stdout).toContain("paused group T")
    const status = await bin(["status", "--db", file])
    expect(status.stdout).toMatch(/paused\s+0 flows, 1 group/)
    expect(status.stdout).toMatch(/discarded\s+1/)
    const groups = await bin(["groups", "--db", file, "--json"])
    expect(JSON.parse(groups.stdout)).toMatchObject([{ groupId: "T", paused: true }])
    const pauseFlow = await bin(["pause", "--db", file, "--flow", "A", "--reason", "and flow A"])
    expect(pauseFlow.code, pauseFlow.stderr).toBe(0)
    const flows = await bin(["flows", "--db", file])
    expect(flows.stdout).toMatch(/PAUSED/)
    expect(flows.stdout).toMatch(/^A .* paused$/m)
    const resumed = await bin(["resume", "--db", file, "--group", "T", "--reason", "back"])
    expect(resumed.stdout).toContain("resumed group T")
    const neither = await bin(["pause", "--db", file, "--reason", "x"])
    expect(neither.code).toBe(2)
    const audit = await bin(["audit", "--db", file])
    expect(audit.stdout).toMatch(/discard\s+A1/)
    expect(audit.stdout).toMatch(/pause\s+-?\s*group:T/)
    expect(auditOf(file).map((row) => row.action)).toEqual(["discard", "pause", "pause", "resume"])
  }, 120_000)
})

describe("policy", () => {
  it("shows the store's policy, changes it with an audited reason, and status shows the new one", async () => {
    const file = path.join(dir, "policy.db")
    await withQueue(file, (queue) => queue.enqueue({ eventId: "A1", flowId: "A", body: {} }))
    const shown = await bin(["policy", "--db", file])
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toMatch(/lease\s+60000 ms/)
    const noReason = await bin(["policy", "--db", file, "--lease", "2m"])
    expect(noReason.code).toBe(2)
    const changed = await bin(["policy", "--db", file, "--lease", "2m", "--retry-budget", "4", "--reason", "slow receiver", "--by", "ops"])
    expect(changed.code, changed.stderr).toBe(0)
    expect(changed.stdout).toContain("policy changed (leaseTicks, retryBudget)")
    const status = await bin(["status", "--db", file])
    expect(status.stdout).toContain("lease 120000 ms, retry budget 4")
    expect(auditOf(file)).toEqual([{ event_id: null, action: "policy", actor: "ops", reason: "slow receiver" }])
  }, 60_000)

  it("--retain-acked and --retain-dedup change the store's retention with an audited reason; policy and status show it", async () => {
    const file = path.join(dir, "retention.db")
    await withQueue(file, (queue) => queue.enqueue({ eventId: "A1", flowId: "A", body: {} }))
    const shown = await bin(["policy", "--db", file])
    expect(shown.stdout).toMatch(/retention\s+acked events 604800000 ms, dedup records 2592000000 ms/)
    const malformed = await bin(["policy", "--db", file, "--retain-acked", "soon", "--reason", "x"])
    expect(malformed.code).toBe(2)
    expect(malformed.stderr).toMatch(/--retain-acked: "soon" is not a duration/)
    const noReason = await bin(["policy", "--db", file, "--retain-acked", "1h"])
    expect(noReason.code).toBe(2)
    const changed = await bin(["policy", "--db", file, "--retain-acked", "1h", "--retain-dedup", "48h", "--reason", "disk filling", "--by", "ops"])
    expect(changed.code, changed.stderr).toBe(0)
    expect(changed.stdout).toContain("policy changed (retention.acked, retention.dedup)")
    expect(changed.stdout).toMatch(/retention\s+acked events 3600000 ms, dedup records 172800000 ms/)
    const status = await bin(["status", "--db", file])
    expect(status.stdout).toMatch(/retention\s+acked events 3600000 ms, dedup records 172800000 ms/)
    const json = await bin(["policy", "--db", file, "--json"])
    expect(JSON.parse(json.stdout)).toMatchObject({ retention: { acked: 3_600_000, dedup: 172_800_000 } })
    expect(auditOf(file)).toEqual([{ event_id: null, action: "policy", actor: "ops", reason: "disk filling" }])
  }, 60_000)
})
