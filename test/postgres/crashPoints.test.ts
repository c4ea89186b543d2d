/**
 * SPEC §5 scenarios 13–18 on PostgreSQL: a worker process (PgRelayQueue and PgInbox, each store
 * a fresh schema with its own pool) dies with `process.exit(73)` (Faults.exitAt) at each of the
 * six fault points of one step (claim A1 {delta: 7} at tick 0 → deliver to the inbox in the same
 * process → settle). At the "before commit" points the process dies with its transaction open;
 * the server rolls it back when the socket closes. The parent inspects both stores after the
 * death, recovers with a fresh process at tick 5, and inspects again. The six crashing workers
 * run concurrently; one fresh recovery process then recovers the six pairs of stores in turn
 * (each with its own pools), which saves five process starts (about a second of CPU each).
 *
 * The expectations are the SPEC's table, identical to the SQLite test in test/processes.
 */
import { Effect } from "effect"
import { beforeAll, expect, it } from "vitest"
import { Faults } from "../../src/index.js"
import type { CrashObservation, CrashPointResult, StepSummary } from "../../scenarios/processes/index.js"
import { runAllPgCrashPoints } from "../../scenarios/processes/pg/index.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

const receiptA1 = [{ eventId: "A1", flowId: "A", seq: 1, body: { delta: 7 } }]

type Expected = Omit<Partial<CrashObservation>, "event"> & { readonly event: Partial<CrashObservation["event"]> }

const claimedOnce = { state: "inflight", attempts: 1, lifetimeAttempts: 1, generation: 1, leaseUntil: 5 } as const

/** What the stores must show right after the death at each point. */
const before: Record<Faults.FaultPoint, Expected> = {
  // Nothing committed: the claim rolled back with the connection.
  "claim:before-commit": {
    clock: { tick: 0, ticket: 0 },
    event: { state: "ready", attempts: 0, lifetimeAttempts: 0, generation: 0, leaseUntil: null },
    receipts: [],
    counterTotal: null,
    lastAppliedSeq: null
  },
  // The claim committed; nothing was sent.
  "claim:after-commit": { clock: { tick: 0, ticket: 1 }, event: claimedOnce, receipts: [], counterTotal: null, lastAppliedSeq: null },
  // The claim committed; the receiver rolled back receipt and effect together.
  "receive:before-commit": { clock: { tick: 0, ticket: 1 }, event: claimedOnce, receipts: [], counterTotal: null, lastAppliedSeq: null },
  // Receipt and effect committed; the queue was never told.
  "receive:after-commit": { clock: { tick: 0, ticket: 1 }, event: claimedOnce, receipts: receiptA1, counterTotal: 7, lastAppliedSeq: 1 },
  // Receipt and effect committed; the ack rolled back.
  "settle:before-commit": { clock: { tick: 0, ticket: 1 }, event: claimedOnce, receipts: receiptA1, counterTotal: 7, lastAppliedSeq: 1 },
  // Everything committed.
  "settle:after-commit": {
    clock: { tick: 0, ticket: 1 },
    event: { state: "acked", attempts: 1, lifetimeAttempts: 1, generation: 1 },
    receipts: receiptA1,
    counterTotal: 7,
    lastAppliedSeq: 1
  }
}

const delivered = (generation: number, reply: "Accepted" | "Duplicate"): StepSummary => ({
  _tag: "Delivered",
  eventId: "A1",
  generation,
  attempts: generation,
  reply,
  outcome: "Acked"
})

/** The recovery worker's steps at tick 5, up to the first Idle. */
const recovery: Record<Faults.FaultPoint, ReadonlyArray<StepSummary>> = {
  // A normal first claim.
  "claim:before-commit": [delivered(1, "Accepted"), { _tag: "Idle" }],
  // Re-claims after the lease (until 5) expired: generation 2, second attempt; nothing was received.
  "claim:after-commit": [delivered(2, "Accepted"), { _tag: "Idle" }],
  "receive:before-commit": [delivered(2, "Accepted"), { _tag: "Idle" }],
  // The resend finds the receipt: Duplicate, no second effect, then ack.
  "receive:after-commit": [delivered(2, "Duplicate"), { _tag: "Idle" }],
  "settle:before-commit": [delivered(2, "Duplicate"), { _tag: "Idle" }],
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

describePg("PostgreSQL crash points (a worker process exits 73, a fresh one recovers at tick 5)", (url) => {
  let results: ReadonlyArray<CrashPointResult> = []

  // The six scenarios are independent (own schemas); their processes run concurrently. The
  // schemas are dropped when the scope closes, after every observation was taken.
  beforeAll(async () => {
    results = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const stores = new Map<Faults.FaultPoint, { queueUrl: string; inboxUrl: string }>()
      for (const point of Faults.faultPoints) {
        const queue = yield* freshSchema(url)
        const inbox = yield* freshSchema(url)
        stores.set(point, { queueUrl: queue.url, inboxUrl: inbox.url })
      }
      return yield* Effect.promise(() => runAllPgCrashPoints((point) => stores.get(point)!))
    })))
  }, 120_000)

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

    // All six end the same: one receipt, one effect (total 7), the event acked.
    expect(result.after).toMatchObject({
      clock: { tick: 5, ticket: ticketsAfter[point] },
      event: { state: "acked", attempts: ticketsAfter[point], lifetimeAttempts: ticketsAfter[point], generation: ticketsAfter[point] },
      receipts: receiptA1,
      counterTotal: 7,
      lastAppliedSeq: 1
    })
  })
})
