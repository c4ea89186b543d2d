/**
 * The short SIGKILL chaos run with the queue on PostgreSQL (`npm run chaos -- --pg`), end to end
 * through the CLI, once per claim mode: 3 worker processes and a producer, 6 flows × 40 events,
 * SIGKILLs as in chaos.test.ts, plus terminations of every relay backend of the run's database
 * (`pg_terminate_backend`). No server restart: the suite's other PostgreSQL tests share the server.
 * The run creates and drops a database of its own on the server of FAIR_RELAY_PG_URL; without it
 * the suite is reported as skipped (test/postgres/support.ts). Each kill costs a respawn (a few
 * seconds of CPU to start a tsx child), which dominates the time.
 *
 * Claim modes: `npm test` runs parallel claims at this size (the mode with more to get wrong:
 * flows claimed concurrently under row locks) and exact claims at a smaller one (4 flows × 24
 * events, 6 SIGKILLs, 3 terminations: the store's advisory lock serializes them, and the crash
 * points, the claim race, the concurrency test and the model-based test cover them too, but only
 * a chaos run kills their processes and backends at random while others wait for the lock).
 * `npm run test:chaos` runs both at this size. FAIR_RELAY_CHAOS_PG_CLAIMS sets the modes, each
 * at this size: "parallel", "exact", or "exact,parallel". A third run has parallel claims and the
 * worker daemon (`--daemon 4`: its fibers' settles and claims share transactions — group commit).
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

/** How big a run is. */
interface Size {
  readonly flows: number
  readonly events: number
  readonly kills: number
  readonly terminations: number
}

const full: Size = { flows: Flows, events: Events, kills: Kills, terminations: Terminations }
const short: Size = { flows: 4, events: 24, kills: 6, terminations: 3 }

/**
 * The claim modes to run and their sizes: FAIR_RELAY_CHAOS_PG_CLAIMS (comma-separated), each at
 * full size; by default parallel at full size and exact at the short one.
 */
const claimRuns = (): ReadonlyArray<readonly ["exact" | "parallel", Size]> => {
  const raw = process.env.FAIR_RELAY_CHAOS_PG_CLAIMS?.trim()
  if (raw === undefined || raw === "") return [["parallel", full], ["exact", short]]
  const modes = raw.split(",").map((mode) => mode.trim())
  for (const mode of modes) {
    if (mode !== "exact" && mode !== "parallel") {
      throw new Error(`FAIR_RELAY_CHAOS_PG_CLAIMS: expected exact and/or parallel, got ${JSON.stringify(raw)}`)
    }
  }
  return [...new Set(modes as Array<"exact" | "parallel">)].map((mode) => [mode, full] as const)
}

const runPg = (dir: string, claims: "exact" | "parallel", size: Size, more: ReadonlyArray<string> = []) =>
  runChaos(dir, [
    "--pg",
    "--claims", claims,
    "--workers", String(Workers),
    "--flows", String(size.flows),
    "--events", String(size.events),
    "--kills", String(size.kills),
    "--terminations", String(size.terminations),
    "--restarts", "0",
    ...more
  ])

/** What a run on PostgreSQL must show besides a clean result: terminations made, no restart, only `SqlError`s. */
const expectCleanOnPg = (dir: string, run: ChaosRun, size: Size) => {
  expect(run.result).toMatchObject({ serverRestarts: 0 })
  expect(run.result.terminations).toBeGreaterThan(0)
  // A terminated connection fails the step it was in (a SqlError) and nothing else: every
  // process reckons with the server's clock, so no ClockRegressed either.
  expect(Object.keys(run.result.workerErrors).filter((tag) => tag !== "SqlError")).toEqual([])
  expect(run.summary).toMatch(/ terminations=[1-9]\d* .*restarts=0 /)
  expectClean(dir, run, size.flows * size.events)
}

describePg("chaos on PostgreSQL (short run)", () => {
  for (const [claims, size] of claimRuns()) {
    const title = `${claims} claims: ${Workers} workers, ${size.flows} flows × ${size.events} events, ${size.kills} SIGKILLs, ` +
      `${size.terminations} backend terminations: nothing lost, nothing twice, order kept`
    it(title, async () => {
      const dir = makeTestDir("chaos-pg")
      const run = await runPg(dir, claims, size)
      expect(run.summary).toMatch(new RegExp(` claims=${claims}( |$)`))
      expectCleanOnPg(dir, run, size)
    }, 300_000)
  }

  it(`parallel claims, the worker daemon (4 fibers per process sharing their transactions): the same`, async () => {
    const dir = makeTestDir("chaos-pg-daemon")
    const run = await runPg(dir, "parallel", full, ["--daemon", "4"])
    expect(run.summary).toMatch(/ daemon_workers=4 /)
    expectCleanOnPg(dir, run, full)
  }, 300_000)
})
