/**
 * The model-based test as a suite defined once per backend (the environment variables are listed
 * in `RelayQueue.model.test.ts`; the backends are in `backends.ts`). The sequences are split into
 * chunks, one test each (default 500 sequences), with seeds derived from one base seed, so that a
 * long run reports its progress and never keeps the vitest worker busy for long; a last test
 * checks that the chunks together reached every outcome, reply kind and typed error.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, FastCheck as fc, Scope } from "effect"
import type { ModelBackend } from "./backends.js"
import { commandArb, policyArb } from "./commands.js"
import type { Coverage } from "./runner.js"
import { runSequence } from "./runner.js"
import { envInt } from "../support/env.js"

export { envInt }

/** Sequences per backend: FAIR_RELAY_MODEL_RUNS, default 1,000. */
export const runs = envInt("FAIR_RELAY_MODEL_RUNS") ?? 1000
/**
 * Sequences on PostgreSQL, in each claim mode: FAIR_RELAY_MODEL_PG_RUNS, else FAIR_RELAY_MODEL_RUNS,
 * else 250 (each command is a few transactions plus a snapshot there).
 */
export const pgRuns = envInt("FAIR_RELAY_MODEL_PG_RUNS") ?? envInt("FAIR_RELAY_MODEL_RUNS") ?? 250
const chunkSize = Math.max(1, envInt("FAIR_RELAY_MODEL_CHUNK") ?? 500)
const baseSeed = envInt("FAIR_RELAY_MODEL_SEED") ?? (Date.now() ^ (Math.random() * 0x1_0000_0000)) | 0
/** FAIR_RELAY_MODEL_PATH: replay one counterexample (with FAIR_RELAY_MODEL_SEED) instead of running chunks. */
export const replayPath = process.env.FAIR_RELAY_MODEL_PATH
/** FAIR_RELAY_MODEL_BACKEND: run the model test of this backend only. */
export const onlyBackend = process.env.FAIR_RELAY_MODEL_BACKEND
const maxCommands = envInt("FAIR_RELAY_MODEL_MAX_COMMANDS") ?? 40

/**
 * An unchanged weight given again, and a seed-mode re-admission of a drained flow, keep the
 * flow's turn (they used to reset its burst; the weight tests in `RelayQueue.model.test.ts`
 * guard the fix).
 */
export const options = { sameWeightResetsBurst: false, seedReadmissionResetsBurst: false }

/**
 * The seed policy (docs/protocol.md, Policy) as a model policy — the model's own copy, as it shares
 * no code with src (src's preset is `seedPolicy` in src/domain/Policy.ts).
 */
export const articlePolicy = {
  leaseTicks: 5,
  retryBudget: 3,
  backoffBase: 2,
  backoffCap: 8,
  admission: "seed" as const,
  clock: "strict" as const
}

/** The test file of each backend. */
const files = {
  sqlite: "test/model/RelayQueue.model.test.ts",
  postgres: "test/model/RelayQueue.model.pg.test.ts",
  "postgres-parallel": "test/model/RelayQueue.model.pg-parallel.test.ts"
} as const

const replayCommand = (backend: ModelBackend["name"], s: number, path: string) =>
  `FAIR_RELAY_MODEL_SEED=${s} FAIR_RELAY_MODEL_PATH=${JSON.stringify(path)} npx vitest run ${files[backend]}`

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
  "settleAndClaim:Acked+claimed",
  "settleAndClaim:Idle+wakeAt",
  "redrive:Redriven",
  "discard:Discarded",
  "pause:Paused",
  "pause:Resumed",
  "error:TargetNotFound",
  "redriveAll:redriven",
  "redriveAll:dry",
  "claim:paused-head-held",
  "setFlowWeight:ok",
  "setGroupWeight:ok",
  "claim:grouped",
  "claim:ungrouped",
  "error:GroupConflict",
  "error:ClockRegressed",
  "regress:strict:ClockRegressed",
  "regress:clamp:ok",
  "clock:kept-by-no-op",
  "error:EventNotFound",
  "error:NotQuarantined",
  "error:GenerationMismatch",
  "error:MissingReason",
  "error:InvalidInput"
]

/** The seed of chunk `index`: distinct per chunk, reproducible from the base seed. */
const chunkSeed = (index: number) => (Math.imul(baseSeed ^ (index * 0x9e3779b1), 0x85ebca6b) ^ index) | 0

/** Lets the event loop turn (timers, vitest's RPC) between sequences: SQLite runs synchronously. */
const yieldToLoop = () => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * Runs `numRuns` sequences from `seed` on `backend` (or replays `path`), adding to `coverage`;
 * throws with the replay command on the first disagreement.
 */
const runChunk = async (backend: ModelBackend, seed: number, numRuns: number, coverage: Coverage, path?: string) => {
  const scope = Effect.runSync(Scope.make())
  try {
    const open = await Effect.runPromise(Scope.extend(backend.chunk, scope))
    const property = fc.asyncProperty(
      policyArb,
      fc.array(commandArb, { minLength: Math.min(8, maxCommands), maxLength: maxCommands, size: "max" }),
      async (policy, commands) => {
        await Effect.runPromise(runSequence(policy, commands, options, coverage, policy, open))
        await yieldToLoop()
      }
    )
    const details = await fc.check(property, { numRuns, seed, ...(path === undefined ? {} : { path, endOnFailure: true }) })
    if (details.failed) {
      const failedPath = details.counterexamplePath ?? ""
      throw new Error(
        `Model-based test failed on ${backend.name} (seed ${details.seed}, path ${JSON.stringify(failedPath)}).\n` +
          `Replay this exact counterexample with:\n  ${replayCommand(backend.name, details.seed, failedPath)}\n\n` +
          fc.defaultReportMessage(details)
      )
    }
    return details.numRuns
  } finally {
    await Effect.runPromise(Scope.close(scope, Exit.void))
  }
}

/**
 * Milliseconds one sequence may take on each backend, for the per-test timeout: generous, as a
 * machine shared with other test runs was seen ~10× slower than a quiet one.
 */
const perSequenceMillis = { sqlite: 1_000, postgres: 6_000, "postgres-parallel": 6_000 } as const

/**
 * Defines the model-based test of `backend`: `total` sequences in chunks, or, with
 * FAIR_RELAY_MODEL_PATH, the one counterexample given by the seed and path.
 */
export const modelSuite = (backend: ModelBackend, total: number) => {
  if (onlyBackend !== undefined && onlyBackend !== backend.name) {
    describe(`RelayQueue (${backend.name}) against the reference model`, () => {
      it.skip(`skipped: FAIR_RELAY_MODEL_BACKEND=${onlyBackend}`, () => {})
    })
    return
  }
  describe(`RelayQueue (${backend.name}) against the reference model`, () => {
    if (replayPath !== undefined) {
      it(`replays one counterexample (seed ${baseSeed}, path ${replayPath})`, async () => {
        await runChunk(backend, baseSeed, 1, new Map(), replayPath)
      }, 120_000)
      return
    }
    const coverage: Coverage = new Map()
    const chunks = Math.ceil(total / chunkSize)
    let done = 0
    const started = Date.now()
    for (let index = 0; index < chunks; index++) {
      const first = index * chunkSize
      const size = Math.min(chunkSize, total - first)
      const seed = chunkSeed(index)
      it(
        `sequences ${first + 1}–${first + size} of ${total} (seed ${seed}) agree with the model, outcome by outcome and snapshot by snapshot`,
        async () => {
          const chunkStarted = Date.now()
          const cpu = process.cpuUsage()
          expect(await runChunk(backend, seed, size, coverage)).toBe(size)
          const { system, user } = process.cpuUsage(cpu)
          done += size
          console.log(
            `model ${backend.name}: chunk ${index + 1}/${chunks} (${done}/${total} sequences, ≤ ${maxCommands} commands each) ` +
              `in ${((Date.now() - chunkStarted) / 1000).toFixed(1)} s (test process CPU ${((user + system) / 1e6).toFixed(1)} s), ` +
              `${((Date.now() - started) / 1000).toFixed(0)} s so far`
          )
        },
        Math.max(120_000, size * perSequenceMillis[backend.name])
      )
    }
    if (total >= 250) {
      it(`the ${total} sequences reached every outcome, reply kind and typed error`, () => {
        if (process.env.FAIR_RELAY_MODEL_COVERAGE) console.log([...coverage].sort().map(([k, v]) => `${k}=${v}`).join(" "))
        const missing = mustCover.filter((key) => (coverage.get(key) ?? 0) === 0)
        expect(missing, "paths the generator never reached").toEqual([])
      })
    }
  })
}
