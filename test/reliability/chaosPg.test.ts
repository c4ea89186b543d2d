/**
 * The short SIGKILL chaos run with the queue on PostgreSQL (`npm run chaos -- --pg`), end to end
 * through the CLI, once per claim mode: 3 worker processes and a producer, 6 flows × 40 events,
 * SIGKILLs as in chaos.test.ts, plus terminations of every relay backend of the run's database
 * (`pg_terminate_backend`). No server restart: the suite's other PostgreSQL tests share the server.
 * The run creates and drops a database of its own on the server of FAIR_RELAY_PG_URL; without it
 * the suite is reported as skipped (test/postgres/support.ts). Each kill costs a respawn (a few
 * seconds of CPU to start a tsx child), which dominates the time.
 *
 * Claim modes: `npm test` runs parallel claims only (the mode with more to get wrong: flows
 * claimed concurrently under row locks; exact claims are serialized by the store's advisory
 * lock, and the crash points, the claim race, the concurrency test and the model-based test
 * cover them on PostgreSQL); `npm run test:chaos` runs both. FAIR_RELAY_CHAOS_PG_CLAIMS sets the
 * modes: "parallel", "exact", or "exact,parallel". A third run has parallel claims and the worker
 * daemon (`--daemon 4`: its fibers' settles and claims share transactions — group commit).
 */
import { expect, it } from "vitest"
import { describePg } from "../postgres/support.js"
import { expectClean, runChaos } from "../support/chaos.js"
import type { ChaosRun } from "../support/chaos.js"
import { makeTestDir } from "../support/tmp.js"

const Workers = 3
const Flows = 6
const Events = 40
const Kills = 12
const Terminations = 5

/** The claim modes to run: FAIR_RELAY_CHAOS_PG_CLAIMS (comma-separated), default parallel only. */
const claimModes = (): ReadonlyArray<"exact" | "parallel"> => {
  const raw = process.env.FAIR_RELAY_CHAOS_PG_CLAIMS?.trim() || "parallel"
  const modes = raw.split(",").map((mode) => mode.trim())
  for (const mode of modes) {
    if (mode !== "exact" && mode !== "parallel") {
      throw new Error(`FAIR_RELAY_CHAOS_PG_CLAIMS: expected exact and/or parallel, got ${JSON.stringify(raw)}`)
    }
  }
  return [...new Set(modes as Array<"exact" | "parallel">)]
}

const runPg = (dir: string, claims: "exact" | "parallel", more: ReadonlyArray<string> = []) =>
  runChaos(dir, [
    "--pg",
    "--claims", claims,
    "--workers", String(Workers),
    "--flows", String(Flows),
    "--events", String(Events),
    "--kills", String(Kills),
    "--terminations", String(Terminations),
    "--restarts", "0",
    ...more
  ])

/** What a run on PostgreSQL must show besides a clean result: terminations made, no restart, only `SqlError`s. */
const expectCleanOnPg = (dir: string, run: ChaosRun) => {
  expect(run.result).toMatchObject({ serverRestarts: 0 })
  expect(run.result.terminations).toBeGreaterThan(0)
  // A terminated connection fails the step it was in (a SqlError) and nothing else: every
  // process reckons with the server's clock, so no ClockRegressed either.
  expect(Object.keys(run.result.workerErrors).filter((tag) => tag !== "SqlError")).toEqual([])
  expect(run.summary).toMatch(/ terminations=[1-9]\d* .*restarts=0 /)
  expectClean(dir, run, Flows * Events)
}

describePg("chaos on PostgreSQL (short run)", () => {
  for (const claims of claimModes()) {
    const title = `${claims} claims: ${Workers} workers, ${Flows} flows × ${Events} events, ${Kills} SIGKILLs, ` +
      `${Terminations} backend terminations: nothing lost, nothing twice, order kept`
    it(title, async () => {
      const dir = makeTestDir("chaos-pg")
      expectCleanOnPg(dir, await runPg(dir, claims))
    }, 300_000)
  }

  it(`parallel claims, the worker daemon (4 fibers per process sharing their transactions): the same`, async () => {
    const dir = makeTestDir("chaos-pg-daemon")
    const run = await runPg(dir, "parallel", ["--daemon", "4"])
    expect(run.summary).toMatch(/ daemon_workers=4 /)
    expectCleanOnPg(dir, run)
  }, 300_000)
})
