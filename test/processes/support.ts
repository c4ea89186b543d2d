/**
 * Shared by the real-process tests: the backends they run on (SQLite files always; PostgreSQL
 * schemas when FAIR_RELAY_PG_URL is set, otherwise reported as skipped by name), and the checks
 * of the claim race (docs/protocol.md, Scenarios, 3) and of the crash points (scenarios 13–18),
 * written once for both backends. The expectations come from docs/protocol.md's table, not from
 * running the code.
 */
import { Effect, Exit, Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect } from "vitest"
import type { Faults } from "../../src/index.js"
import type {
  ClaimRacesResult,
  CrashObservation,
  CrashPointResult,
  StepSummary,
  StoreBackend
} from "../../scenarios/processes/index.js"
import { sqliteFiles } from "../../scenarios/processes/index.js"
import { freshSchema, pgUrl, skippedBackends } from "../support/backends.js"
import { testTmpDir } from "../support/tmp.js"

/** A backend of the real-process tests. */
export interface ProcessBackend {
  readonly name: "sqlite" | "postgres"
  /** Runs `body` with a source of fresh stores, all removed once `body` settles. */
  readonly withStores: <A>(body: (stores: StoreBackend) => Promise<A>) => Promise<A>
}

/** SQLite: files in a temporary directory. */
const sqlite: ProcessBackend = {
  name: "sqlite",
  withStores: async (body) => {
    const dir = fs.mkdtempSync(path.join(testTmpDir(), "fair-relay-processes-"))
    try {
      return await body(sqliteFiles(dir))
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** PostgreSQL: a fresh schema per store (its own pool in each process), dropped afterwards. */
const postgres = (url: string): ProcessBackend => ({
  name: "postgres",
  withStores: async (body) => {
    const scope = Effect.runSync(Scope.make())
    try {
      return await body({
        name: "postgres",
        create: () => Effect.runPromise(Scope.extend(freshSchema(url), scope)).then((schema) => schema.url)
      })
    } finally {
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }
})

if (pgUrl === undefined) {
  console.warn("*** FAIR_RELAY_PG_URL is not set: the real-process tests of test/processes on PostgreSQL are SKIPPED ***")
}

/**
 * One suite per configured backend (`<title> [sqlite]`, `<title> [postgres]`), and a skipped one
 * per backend that is not configured (`skippedBackends`), named after it and why
 * (`<title> [postgres] [SKIPPED: FAIR_RELAY_PG_URL is not set]`, as in test/postgres), so the
 * report lists its tests as skipped instead of leaving them out.
 */
export const describeBackends = (title: string, body: (backend: ProcessBackend) => void): void => {
  describe(`${title} [sqlite]`, () => body(sqlite))
  if (pgUrl !== undefined) {
    const url = pgUrl
    describe(`${title} [postgres]`, () => body(postgres(url)))
  }
  for (const name of skippedBackends) {
    describe.skip(`${title} [${name.split(" ")[0]}] [SKIPPED: FAIR_RELAY_PG_URL is not set]`, () =>
      body({ name: "postgres", withStores: () => Promise.reject(new Error(`${name} is not configured`)) }))
  }
}

/**
 * The claim race's outcome, every round: exactly A1, B1 and C1 claimed (seq 1, generation 1, lease
 * until 5), no failure, every other process `Idle`, and the store after the race showing ticket 3,
 * A1 B1 C1 inflight, A2 B2 C2 ready, and A, B, C served 1, 2, 3: the global (served, flow_id)
 * order breaks the tie at served 0 the same way whichever processes won. Every process exits 0.
 */
export const checkClaimRaces = (result: ClaimRacesResult, expected: { readonly rounds: number; readonly processes: number }) => {
  const { exitCodes, rounds } = result
  const { processes } = expected
  expect(rounds).toHaveLength(expected.rounds)
  for (const round of rounds) {
    const context = `round ${round.round}: ${JSON.stringify(round.perProcess.map((p) => p.claim))}`
    expect(round.failures, context).toEqual([])
    expect(round.perProcess, context).toHaveLength(processes)
    expect(new Set(round.perProcess.map((p) => p.pid)).size, context).toBe(processes)
    expect(round.claimedIds, context).toEqual(["A1", "B1", "C1"])
    expect(round.idleCount, context).toBe(processes - 3)
    for (const { claim } of round.perProcess) {
      if (claim._tag === "Claimed") {
        expect(["A2", "B2", "C2"]).not.toContain(claim.eventId)
        expect(claim).toMatchObject({ seq: 1, generation: 1, leaseUntil: 5 })
      }
    }
    // The parent's view of the store after the race.
    expect(round.snapshot.clock, context).toEqual({ tick: 0, ticket: 3 })
    const events = round.snapshot.events.map((e) => [e.eventId, e.state, e.generation, e.attempts])
    expect(events, context).toEqual([
      ["A1", "inflight", 1, 1],
      ["A2", "ready", 0, 0],
      ["B1", "inflight", 1, 1],
      ["B2", "ready", 0, 0],
      ["C1", "inflight", 1, 1],
      ["C2", "ready", 0, 0]
    ])
    // Three claims, three distinct tickets: the served values are a permutation of 1..3 ...
    expect(round.snapshot.flows.map((f) => f.served).sort(), context).toEqual([1, 2, 3])
    // ... and flows tie at served 0, so A, B, C take tickets 1, 2, 3 whichever processes won.
    expect(round.snapshot.flows.map((f) => [f.flowId, f.served]), context).toEqual([["A", 1], ["B", 2], ["C", 3]])
  }
  expect(exitCodes).toEqual(Array.from({ length: processes }, () => 0))
}

const receiptA1 = [{ eventId: "A1", flowId: "A", seq: 1, body: { delta: 7 } }]

type Expected = Omit<Partial<CrashObservation>, "event"> & { readonly event: Partial<CrashObservation["event"]> }

const claimedOnce = { state: "inflight", attempts: 1, lifetimeAttempts: 1, generation: 1, leaseUntil: 5 } as const

const delivered = (generation: number, reply: "Accepted" | "Duplicate"): StepSummary => ({
  _tag: "Delivered",
  eventId: "A1",
  generation,
  attempts: generation,
  reply,
  outcome: "Acked"
})

/** The table of docs/protocol.md, Crash points (scenarios 13–18), per fault point. */
export const crashExpectations: {
  /** What the stores must show right after the death at each point. */
  readonly before: Record<Faults.FaultPoint, Expected>
  /** The recovery worker's steps at tick 5, up to the first Idle. */
  readonly recovery: Record<Faults.FaultPoint, ReadonlyArray<StepSummary>>
  /** Claims in total (the ticket after recovery). */
  readonly ticketsAfter: Record<Faults.FaultPoint, number>
} = {
  before: {
    // Nothing committed: the claim rolled back (on PostgreSQL, with the connection).
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
  },
  recovery: {
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
  },
  ticketsAfter: {
    "claim:before-commit": 1,
    "claim:after-commit": 2,
    "receive:before-commit": 2,
    "receive:after-commit": 2,
    "settle:before-commit": 2,
    "settle:after-commit": 1
  }
}

/** One crash scenario against that table: the death, the stores after it, the recovery, the end. */
export const checkCrashPoint = (result: CrashPointResult, point: Faults.FaultPoint) => {
  const { before, recovery, ticketsAfter } = crashExpectations
  expect(result.point).toBe(point)
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
    // The recovery writes at tick 5 unless it had nothing to do: an Idle claim writes nothing.
    clock: { tick: point === "settle:after-commit" ? 0 : 5, ticket: ticketsAfter[point] },
    event: { state: "acked", attempts: ticketsAfter[point], lifetimeAttempts: ticketsAfter[point], generation: ticketsAfter[point] },
    receipts: receiptA1,
    counterTotal: 7,
    lastAppliedSeq: 1
  })
}
