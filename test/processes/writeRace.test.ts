/**
 * The immediate-transaction proof: 6 OS processes, released by a barrier, each run 150 rounds of
 * enqueue (into the SAME flow F) + claim + settle(Accepted) against one queue file, all at tick 0.
 * Every one of those operations is a write transaction that reads before it writes.
 *
 * Contrast (not tested here on purpose — we do not keep a deliberately broken path): with a
 * deferred `BEGIN`, two such transactions both start as readers; when one tries to write while
 * another holds or has just used the write lock, SQLite fails it at once with SQLITE_BUSY instead
 * of waiting — the busy timeout cannot help a reader that must upgrade (deadlock avoidance, or a
 * stale WAL snapshot). Measured once by hand, with the same 6 processes × 150 enqueues into one
 * flow going through the real SqlRelayQueue code but with the store's `write` swapped for its
 * deferred-`BEGIN` `read` transaction: 801 of 900 and 810 of 900 enqueues failed with
 * `SqlError ... database is locked` (better-sqlite3 code SQLITE_BUSY), the whole run taking about
 * 1.2 s — far below the 5 s busy timeout, so no waiting happened. `BEGIN IMMEDIATE`
 * (SqliteStore's `write`) takes the write lock at the start, so the busy timeout covers the whole
 * wait and nothing fails.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { runWriteRace } from "../../scenarios/processes/index.js"
import { testTmpDir } from "../support/tmp.js"

const Processes = 6
const PerProcess = 150
const Total = Processes * PerProcess

describe("write race (6 OS processes, one flow, BEGIN IMMEDIATE)", () => {
  const dir = fs.mkdtempSync(path.join(testTmpDir(), "fair-relay-write-race-"))
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

  it(`hands out seqs 1..${Total} once each, and one ticket per claim`, async () => {
    const result = await runWriteRace({ dir, processes: Processes, eventsPerProcess: PerProcess, flowId: "F" })
    const { reports, snapshot } = result

    // No process failed, no operation failed.
    expect(result.errors).toEqual([])
    expect(result.exitCodes).toEqual(Array.from({ length: Processes }, () => 0))
    for (const report of reports) expect(report.enqueued).toHaveLength(PerProcess)

    // Seqs: exactly 1..900, no gap, no duplicate; each writer's own seqs increase.
    expect(result.seqs).toEqual(Array.from({ length: Total }, (_, i) => i + 1))
    for (const report of reports) {
      const own = report.enqueued.map((e) => e.seq)
      expect(own).toEqual([...own].sort((a, b) => a - b))
    }
    // The store agrees with what the writers were told.
    const stored = new Map(snapshot.events.map((e) => [e.eventId as string, e]))
    expect(stored.size).toBe(Total)
    for (const report of reports) {
      for (const { eventId, seq } of report.enqueued) expect(stored.get(eventId)).toMatchObject({ flowId: "F", seq })
    }

    // Claims: one ticket each, each event claimed at most once, in seq order, every claim acked.
    const claims = reports.flatMap((r) => r.claims)
    expect(claims.length).toBe(result.claimCount)
    expect(result.claimCount).toBeGreaterThan(0)
    for (const claim of claims) expect(claim).toMatchObject({ generation: 1, outcome: "Acked" })
    const claimedSeqs = claims.map((c) => c.seq).sort((a, b) => a - b)
    expect(claimedSeqs).toEqual(Array.from({ length: result.claimCount }, (_, i) => i + 1))
    for (const report of reports) {
      const own = report.claims.map((c) => c.seq)
      expect(own).toEqual([...own].sort((a, b) => a - b))
    }

    // Clock and flow are consistent with all of that.
    expect(snapshot.clock).toEqual({ tick: 0, ticket: result.claimCount })
    expect(snapshot.flows).toHaveLength(1)
    expect(snapshot.flows[0]).toMatchObject({ flowId: "F", seq: Total, served: result.claimCount })
    const acked = snapshot.events.filter((e) => e.state === "acked").map((e) => e.seq)
    expect(acked).toEqual(claimedSeqs)
    for (const event of snapshot.events) {
      if (event.state !== "acked") expect(event).toMatchObject({ state: "ready", generation: 0, attempts: 0 })
    }
    const head = result.claimCount < Total ? result.claimCount + 1 : null
    expect(snapshot.flows[0]?.headSeq).toBe(head)
  }, 120_000)
})
