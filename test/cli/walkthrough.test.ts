/**
 * The operator's walk-through, on the real bin and real files: enqueue, run the worker against
 * the sample receiver with a low limit, find the quarantined event, read why, redrive it with a
 * reason, raise the limit, run again, and see everything acked with the decision audited.
 * Independent read commands run side by side to keep the spawns (each about a second) few.
 */
import { afterAll, describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { bin, lines, tempDir, totals } from "./support.js"

const dir = tempDir("walkthrough")
const db = path.join(dir, "queue.db")
const inbox = path.join(dir, "inbox.db")

afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

const ok = (ran: { code: number | null; stderr: string }, what: string) =>
  expect(ran.code, `${what} failed: ${ran.stderr}`).toBe(0)

describe("fair-relay operator walk-through", () => {
  it("finds the quarantined event, reads why, redrives it with a reason, and watches it complete", async () => {
    // A store is created only when asked to.
    const first = await bin(["enqueue", "--db", db, "--create", "--flow", "A", "--id", "A1", "--body", `{"delta":10}`])
    ok(first, "enqueue A1")
    expect(first.stdout.trim()).toBe("enqueued A1 as A#1")
    const [a2, b1, again] = await Promise.all([
      bin(["enqueue", "--db", db, "--flow", "A", "--id", "A2", "--body", `{"delta":1}`]),
      bin(["enqueue", "--flow", "B", "--id", "B1", "--body", `{"delta":3}`, "--json"], { env: { FAIR_RELAY_DB: db } }),
      bin(["enqueue", "--db", db, "--flow", "A", "--id", "A1", "--body", `{ "delta": 10 }`])
    ])
    ok(a2, "enqueue A2")
    ok(b1, "enqueue B1")
    ok(again, "enqueue A1 again")
    expect(JSON.parse(b1.stdout)).toEqual({ _tag: "Enqueued", seq: 1, eventId: "B1", flowId: "B" })
    expect(again.stdout).toContain("already enqueued as A#1")

    // The receiver refuses deltas above 5: A1 is quarantined, A2 waits behind it, B1 completes.
    const limited = await bin(["run", "--db", db, "--inbox", inbox, "--max-delta", "5", "--until-idle"])
    ok(limited, "run --max-delta 5")
    expect(limited.stdout).toMatch(/A1 {2}generation 1 {2}Rejected unsupported_delta → Quarantined/)
    expect(limited.stdout).toMatch(/B1 {2}generation 1 {2}Accepted → Acked/)
    expect(limited.stdout).not.toMatch(/^A2/m)

    const [status, quarantined, shown, flows] = await Promise.all([
      bin(["status", "--db", db]),
      bin(["events", "--db", db, "--state", "quarantined", "--json"]),
      bin(["show", "A1", "--db", db]),
      bin(["--db", db, "flows", "--json"])
    ])
    for (const [ran, what] of [[status, "status"], [quarantined, "events"], [shown, "show"], [flows, "flows"]] as const) ok(ran, what)
    expect(status.stdout).toMatch(/^quarantined +1$/m)
    expect(status.stdout).toMatch(/^acked +1$/m)
    expect(status.stdout).toMatch(/^ready +1$/m)
    expect(status.stdout).toMatch(/^eligible heads +0$/m)
    const stuck = JSON.parse(quarantined.stdout) as Array<Record<string, unknown>>
    expect(stuck.map((e) => [e.eventId, e.state, e.generation, e.reason])).toEqual([["A1", "quarantined", 1, "unsupported_delta"]])
    expect(shown.stdout).toMatch(/^state +quarantined$/m)
    expect(shown.stdout).toMatch(/^reason +unsupported_delta$/m)
    expect(shown.stdout).toMatch(/^generation +1$/m)
    expect(shown.stdout).toMatch(/^body +\{"delta":10\}$/m)
    expect(shown.stdout).toContain(`fair-relay redrive A1 --generation 1 --reason '…'`)
    const flowRows = JSON.parse(flows.stdout) as Array<Record<string, unknown>>
    expect(flowRows.map((f) => [f.flowId, f.seq, f.headSeq, f.headState])).toEqual([["A", 2, 1, "quarantined"], ["B", 1, null, null]])

    const redriven = await bin(["redrive", "A1", "--db", db, "--generation", "1", "--reason", "limit raised", "--by", "alice"])
    ok(redriven, "redrive")
    expect(redriven.stdout.trim()).toBe("redriven A1: generation 1 → 2, ready now (by alice: limit raised)")

    const raised = await bin(["run", "--db", db, "--inbox", inbox, "--max-delta", "1000", "--until-idle", "--json"])
    ok(raised, "run --max-delta 1000")
    const summary = JSON.parse(raised.stdout) as { outcomes: Record<string, number>; stats: { byState: Record<string, number> } }
    expect(summary.outcomes).toEqual({ Acked: 2 })
    expect(summary.stats.byState).toEqual({ ready: 0, inflight: 0, acked: 3, quarantined: 0, discarded: 0 })

    const [audit, finalStatus, finalShow] = await Promise.all([
      bin(["audit", "--db", db, "--json"]),
      bin(["status", "--db", db, "--json"]),
      bin(["show", "A1", "--db", db])
    ])
    ok(audit, "audit")
    ok(finalStatus, "status")
    ok(finalShow, "show")
    const rows = JSON.parse(audit.stdout) as Array<Record<string, unknown>>
    expect(rows).toHaveLength(1)
    expect(rows[0]).toMatchObject({ eventId: "A1", reason: "limit raised", generation: 2, actor: "alice" })
    const stats = JSON.parse(finalStatus.stdout) as { db: string; byState: Record<string, number>; eligibleHeads: number }
    expect(stats).toMatchObject({ db, byState: { ready: 0, inflight: 0, acked: 3, quarantined: 0, discarded: 0 }, eligibleHeads: 0 })
    expect(finalShow.stdout).toMatch(/^state +acked$/m)
    expect(finalShow.stdout).toMatch(/^attempts +1 this round, 2 in total$/m)
    expect(finalShow.stdout).toMatch(/alice +limit raised/)
    // The receiver applied each event once, in order: A = 10 + 1, B = 3.
    expect(totals(inbox)).toEqual({ A: 11, B: 3 })
    // Nothing but the command's output on stdout; errors and logs would be on stderr.
    for (const ran of [status, shown, audit]) expect(lines(ran.stderr)).toEqual([])
  }, 180_000)
})
