/**
 * SPEC §5 scenarios 13–18: a worker process dies with `process.exit(73)` (Faults.exitAt) at each
 * of the six fault points of one step (claim A1 {delta: 7} at tick 0 → deliver to the inbox in the
 * same process → settle). The parent inspects both stores after the death, recovers with a fresh
 * process at tick 5 (the seed lease is 5, so a claim made at 0 has expired), and inspects again.
 *
 * The expectations below come from the SPEC's table, not from running the code.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { Faults } from "../../src/index.js"
import type { CrashObservation, CrashPointResult, StepSummary } from "../../scenarios/processes/index.js"
import { runAllCrashPoints } from "../../scenarios/processes/index.js"

const receiptA1 = [{ eventId: "A1", flowId: "A", seq: 1, body: { delta: 7 } }]

type Expected = Omit<Partial<CrashObservation>, "event"> & { readonly event: Partial<CrashObservation["event"]> }

/** What the stores must show right after the death at each point. */
const before: Record<Faults.FaultPoint, Expected> = {
  // Nothing committed: the claim rolled back.
  "claim:before-commit": {
    clock: { tick: 0, ticket: 0 },
    event: { state: "ready", attempts: 0, generation: 0 },
    receipts: [],
    counterTotal: null
  },
  // The claim committed; nothing was sent.
  "claim:after-commit": {
    clock: { tick: 0, ticket: 1 },
    event: { state: "inflight", attempts: 1, generation: 1, leaseUntil: 5 },
    receipts: [],
    counterTotal: null
  },
  // The claim committed; the receiver rolled back receipt and effect together.
  "receive:before-commit": {
    clock: { tick: 0, ticket: 1 },
    event: { state: "inflight", attempts: 1, generation: 1, leaseUntil: 5 },
    receipts: [],
    counterTotal: null,
    lastAppliedSeq: null
  },
  // Receipt and effect committed; the queue was never told.
  "receive:after-commit": {
    clock: { tick: 0, ticket: 1 },
    event: { state: "inflight", attempts: 1, generation: 1, leaseUntil: 5 },
    receipts: receiptA1,
    counterTotal: 7,
    lastAppliedSeq: 1
  },
  // Receipt and effect committed; the ack rolled back.
  "settle:before-commit": {
    clock: { tick: 0, ticket: 1 },
    event: { state: "inflight", attempts: 1, generation: 1, leaseUntil: 5 },
    receipts: receiptA1,
    counterTotal: 7,
    lastAppliedSeq: 1
  },
  // Everything committed.
  "settle:after-commit": {
    clock: { tick: 0, ticket: 1 },
    event: { state: "acked", attempts: 1, generation: 1 },
    receipts: receiptA1,
    counterTotal: 7,
    lastAppliedSeq: 1
  }
}

/** The recovery worker's steps at tick 5, up to the first Idle. */
const recovery: Record<Faults.FaultPoint, ReadonlyArray<StepSummary>> = {
  // A normal first claim.
  "claim:before-commit": [
    { _tag: "Delivered", eventId: "A1", generation: 1, attempts: 1, reply: "Accepted", outcome: "Acked" },
    { _tag: "Idle" }
  ],
  // Re-claims after the lease (until 5) expired: generation 2, second attempt.
  "claim:after-commit": [
    { _tag: "Delivered", eventId: "A1", generation: 2, attempts: 2, reply: "Accepted", outcome: "Acked" },
    { _tag: "Idle" }
  ],
  "receive:before-commit": [
    { _tag: "Delivered", eventId: "A1", generation: 2, attempts: 2, reply: "Accepted", outcome: "Acked" },
    { _tag: "Idle" }
  ],
  // The resend finds the receipt: Duplicate, no second effect, then ack.
  "receive:after-commit": [
    { _tag: "Delivered", eventId: "A1", generation: 2, attempts: 2, reply: "Duplicate", outcome: "Acked" },
    { _tag: "Idle" }
  ],
  "settle:before-commit": [
    { _tag: "Delivered", eventId: "A1", generation: 2, attempts: 2, reply: "Duplicate", outcome: "Acked" },
    { _tag: "Idle" }
  ],
  // Nothing left to do.
  "settle:after-commit": [{ _tag: "Idle" }]
}

/** Claims in total (the ticket after recovery). */
const ticketsAfter: Record<Faults.FaultPoint, number> = {
  "claim:before-commit": 1,
  "claim:after-commit": 2,
  "receive:before-commit": 2,
  "receive:after-commit": 2,
  "settle:before-commit": 2,
  "settle:after-commit": 1
}

describe("crash points (a worker process exits 73, a fresh one recovers at tick 5)", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "fair-relay-crash-"))
  let results: ReadonlyArray<CrashPointResult> = []

  // The six scenarios are independent (own files); run their processes concurrently.
  beforeAll(async () => {
    results = await runAllCrashPoints({ dir })
  }, 120_000)
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

  const resultFor = (point: Faults.FaultPoint): CrashPointResult => {
    const result = results.find((r) => r.point === point)
    if (result === undefined) throw new Error(`no result for ${point}`)
    return result
  }

  it("covers all six fault points", () => {
    expect(results.map((r) => r.point)).toEqual([...Faults.faultPoints])
  })

  it.each(Faults.faultPoints.map((point) => [point]))("%s", (point) => {
    const result = resultFor(point)
    // The worker died at the point, abruptly.
    expect(result.survived).toBeNull()
    expect(result.crashExit).toEqual({ code: 73, signal: null })

    // What the stores show after the death.
    expect(result.before).toMatchObject(before[point])

    // Recovery by a fresh process at tick 5.
    expect(result.recoveryExit).toEqual({ code: 0, signal: null })
    expect(result.recoverySteps).toEqual(recovery[point])

    // All six end the same: one receipt, one effect, the event acked.
    expect(result.after).toMatchObject({
      clock: { tick: 5, ticket: ticketsAfter[point] },
      event: { state: "acked", attempts: ticketsAfter[point], generation: ticketsAfter[point] },
      receipts: receiptA1,
      counterTotal: 7,
      lastAppliedSeq: 1
    })
  })
})
