/**
 * Model-based test of the queue protocol: random sequences of enqueue / enqueueBatch / claim /
 * claimBatch / settle (every reply kind; current, stale, forged and unknown tokens) / settleBatch
 * / redrive (right and wrong generations, blank reasons, unknown ids) / setFlowWeight / time
 * advances / clock regressions / malformed calls, run against a fresh in-memory SQLite queue
 * and the pure reference model (`QueueModel.ts`, written from SPEC §3). Every outcome and the
 * whole snapshot after every command must match.
 *
 *   FAIR_RELAY_MODEL_RUNS=100000 npx vitest run test/model     # the long run (npm run test:long)
 *   FAIR_RELAY_MODEL_SEED=<seed> FAIR_RELAY_MODEL_PATH=<path> npx vitest run test/model   # replay
 *
 * A failure prints the seed and the counterexample path, and the exact command to replay it.
 * Also: FAIR_RELAY_MODEL_MAX_COMMANDS (longest sequence, default 40), FAIR_RELAY_MODEL_COVERAGE=1
 * (print how often each outcome and error was reached).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc, TestContext } from "effect"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { RelayQueue as RelayQueueTag } from "../../src/services/RelayQueue.js"
import { commandArb, policyArb } from "./commands.js"
import type { Coverage } from "./runner.js"
import { runSequence } from "./runner.js"

const envInt = (name: string): number | undefined => {
  const raw = process.env[name]
  if (raw === undefined || raw.trim() === "") return undefined
  const n = Number(raw)
  if (!Number.isSafeInteger(n)) throw new Error(`${name} must be an integer, got ${JSON.stringify(raw)}`)
  return n
}

const runs = envInt("FAIR_RELAY_MODEL_RUNS") ?? 1000
const seed = envInt("FAIR_RELAY_MODEL_SEED") ?? (Date.now() ^ (Math.random() * 0x1_0000_0000)) | 0
const replayPath = process.env.FAIR_RELAY_MODEL_PATH
const maxCommands = envInt("FAIR_RELAY_MODEL_MAX_COMMANDS") ?? 40

/**
 * An unchanged weight given again, and a seed-mode re-admission of a drained flow, keep the
 * flow's turn (they used to reset its burst; the tests below guard the fix).
 */
const options = { sameWeightResetsBurst: false, seedReadmissionResetsBurst: false }

const replayCommand = (s: number, path: string) =>
  `FAIR_RELAY_MODEL_SEED=${s} FAIR_RELAY_MODEL_PATH=${JSON.stringify(path)} npx vitest run test/model/RelayQueue.model.test.ts`

/** Paths every default run must reach: each reply kind, each outcome, each typed error. */
const mustCover = [
  "enqueue:Enqueued",
  "enqueue:Existing",
  "error:EnqueueConflict",
  "enqueueBatch:Enqueued",
  "claim:Claimed",
  "claim:Idle",
  "claim:Idle+wakeAt",
  "claimBatch:size2",
  "settle:Acked",
  "settle:RetryScheduled",
  "settle:Quarantined",
  "settle:Stale",
  "settle:Expired",
  "settleBatch:Acked",
  "redrive:Redriven",
  "setFlowWeight:ok",
  "error:ClockRegressed",
  "error:EventNotFound",
  "error:NotQuarantined",
  "error:GenerationMismatch",
  "error:MissingReason",
  "error:InvalidInput"
]

describe("RelayQueue (SQLite) against the reference model", () => {
  it(
    `${replayPath === undefined ? runs : "replays one"} random command sequence(s) with identical outcomes and snapshots`,
    async () => {
      const coverage: Coverage = new Map()
      const property = fc.asyncProperty(
        policyArb,
        fc.array(commandArb, { minLength: Math.min(8, maxCommands), maxLength: maxCommands, size: "max" }),
        (policy, commands) => Effect.runPromise(runSequence(policy, commands, options, coverage))
      )
      const started = Date.now()
      const details = await fc.check(property, {
        numRuns: runs,
        seed,
        ...(replayPath === undefined ? {} : { path: replayPath, endOnFailure: true })
      })
      const seconds = ((Date.now() - started) / 1000).toFixed(1)
      if (details.failed) {
        const path = details.counterexamplePath ?? ""
        throw new Error(
          `Model-based test failed (seed ${details.seed}, path ${JSON.stringify(path)}).\n` +
            `Replay this exact counterexample with:\n  ${replayCommand(details.seed, path)}\n\n` +
            fc.defaultReportMessage(details)
        )
      }
      if (process.env.FAIR_RELAY_MODEL_COVERAGE) console.log([...coverage].sort().map(([k, v]) => `${k}=${v}`).join(" "))
      console.log(`model: ${details.numRuns} sequences (≤ ${maxCommands} commands each) passed in ${seconds} s, seed ${details.seed}`)
      expect(details.numRuns).toBe(replayPath === undefined ? runs : details.numRuns)
      if (replayPath === undefined && runs >= 500) {
        const missing = mustCover.filter((key) => (coverage.get(key) ?? 0) === 0)
        expect(missing, "paths the generator never reached").toEqual([])
      }
    },
    Math.max(120_000, runs * 200)
  )
})

describe("the harness itself", () => {
  // SPEC §5 scenario 4 as commands: A1 claimed at 0, Retry → RetryScheduled{nextAt: 2} under the
  // seed policy (lease 5, budget 3, base 2, cap 8); at 2 it is claimed again and acked.
  const policy = { leaseTicks: 5, retryBudget: 3, backoffBase: 2, backoffCap: 8, admission: "seed" as const }
  const commands = [
    { t: "enqueue" as const, spec: { flow: 0, reuse: null, delta: 1, weight: null, idStyle: 0 } },
    { t: "claim" as const },
    { t: "settle" as const, spec: { target: "live" as const, pick: 0, forge: "none" as const, reply: { _tag: "Retry" as const, reason: "unavailable" } } },
    { t: "advance" as const, by: 1 },
    { t: "claim" as const },
    { t: "advance" as const, by: 1 },
    { t: "claim" as const },
    { t: "settle" as const, spec: { target: "live" as const, pick: 0, forge: "none" as const, reply: { _tag: "Accepted" as const } } }
  ]

  it("a hand-written sequence (SPEC scenario 4) agrees with the model", () =>
    Effect.runPromise(runSequence(policy, commands, options)))

  it("a queue that differs from the model (another backoff) is caught", async () => {
    await expect(Effect.runPromise(runSequence(policy, commands, options, undefined, { ...policy, backoffBase: 3 })))
      .rejects.toThrow(/RetryScheduled|nextAt/)
  })
})

/** Claims `n` times, acking each and calling `after` with the claimed flow; returns the flows. */
const claimOrder = (n: number, after: (flowId: string, i: number) => Effect.Effect<unknown, unknown>) =>
  Effect.gen(function*() {
    const queue = yield* RelayQueueTag
    const order: Array<string> = []
    for (let i = 0; i < n; i++) {
      const claimed = yield* queue.claim
      if (claimed._tag === "Idle") break
      order.push(claimed.event.flowId)
      yield* queue.settle(claimed.token, { _tag: "Accepted" })
      yield* after(claimed.event.flowId, i)
    }
    return order
  })

const withQueue = <A, E>(effect: Effect.Effect<A, E, RelayQueueTag>) =>
  Effect.runPromise(
    effect.pipe(Effect.provide(SqliteRelayQueue.layer({ filename: ":memory:" })), Effect.provide(TestContext.TestContext))
  )

// README: "A flow of weight w keeps its place for w claims in a row and then moves behind
// everyone". With B (weight 1) and H (weight 2) always eligible, the dispatch is B H H B H H.
describe("a flow's turn survives an unchanged weight and a re-admission (weights)", () => {
  // src used to reset `burst` on every enqueue that carried a weight, even an unchanged one: a
  // producer passing its weight with every enqueue kept H at the front and B starved.
  it("re-sending an unchanged weight with each enqueue does not restart H's turn", () =>
    withQueue(Effect.gen(function*() {
      const queue = yield* RelayQueueTag
      for (let i = 1; i <= 3; i++) yield* queue.enqueue({ eventId: `B${i}`, flowId: "B", body: { delta: 1 } })
      for (let i = 1; i <= 3; i++) yield* queue.enqueue({ eventId: `H${i}`, flowId: "H", body: { delta: 1 }, weight: 2 })
      let next = 10
      const order = yield* claimOrder(6, (flowId) =>
        queue.enqueue({ eventId: `${flowId}${next++}`, flowId, body: { delta: 1 }, ...(flowId === "H" ? { weight: 2 } : {}) }))
      expect(order).toEqual(["B", "H", "H", "B", "H", "H"])
    })))

  // Under seed admission a drained flow keeps its place (served) when its next event arrives; src
  // used to reset its burst too, so a weight-2 flow refilled after each ack never used up its turn.
  it("a weight-2 flow refilled after each ack still moves behind B after two claims", () =>
    withQueue(Effect.gen(function*() {
      const queue = yield* RelayQueueTag
      for (let i = 1; i <= 6; i++) yield* queue.enqueue({ eventId: `B${i}`, flowId: "B", body: { delta: 1 } })
      yield* queue.enqueue({ eventId: "H1", flowId: "H", body: { delta: 1 }, weight: 2 })
      let next = 2
      const order = yield* claimOrder(6, (flowId) =>
        flowId === "H" ? queue.enqueue({ eventId: `H${next++}`, flowId: "H", body: { delta: 1 } }) : Effect.void)
      expect(order).toEqual(["B", "H", "H", "B", "H", "H"])
    })))

  it("control: without re-sent weights and without draining, the order is B H H B H H", () =>
    withQueue(Effect.gen(function*() {
      const queue = yield* RelayQueueTag
      for (let i = 1; i <= 6; i++) yield* queue.enqueue({ eventId: `B${i}`, flowId: "B", body: { delta: 1 } })
      yield* queue.enqueue({ eventId: "H1", flowId: "H", body: { delta: 1 }, weight: 2 })
      for (let i = 2; i <= 6; i++) yield* queue.enqueue({ eventId: `H${i}`, flowId: "H", body: { delta: 1 } })
      const order = yield* claimOrder(6, () => Effect.void)
      expect(order).toEqual(["B", "H", "H", "B", "H", "H"])
    })))
})
