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
 * modes: "parallel", "exact", or "exact,parallel".
 */
import { expect, it } from "vitest"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import type { ChaosResult } from "../../scenarios/chaos/run.js"
import { spawnChild } from "../../scenarios/processes/spawn.js"
import { describePg } from "../postgres/support.js"
import { makeTestDir } from "../support/tmp.js"

const main = fileURLToPath(new URL("../../scenarios/chaos/main.ts", import.meta.url))

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

describePg("chaos on PostgreSQL (short run)", () => {
  for (const claims of claimModes()) {
    const title = `${claims} claims: ${Workers} workers, ${Flows} flows × ${Events} events, ${Kills} SIGKILLs, ` +
      `${Terminations} backend terminations: nothing lost, nothing twice, order kept`
    it(title, async () => {
      const dir = makeTestDir("chaos-pg")
      const child = spawnChild(main, [
        "--dir", dir,
        "--pg",
        "--claims", claims,
        "--workers", String(Workers),
        "--flows", String(Flows),
        "--events", String(Events),
        "--kills", String(Kills),
        "--terminations", String(Terminations),
        "--restarts", "0",
        "--json",
        "--quiet"
      ])
      try {
        const message = await child.expect("result", 280_000)
        const exit = await child.exit
        const result = message.result as ChaosResult
        const summary = child.noise().find((line) => line.startsWith("kills="))
        console.log(summary)

        expect(result.details, child.stderr()).toEqual([])
        expect(result).toMatchObject({
          events: Flows * Events,
          acked: Flows * Events,
          lost: 0,
          duplicates: 0,
          orderViolations: 0,
          inconsistencies: 0,
          unexpectedExits: 0,
          stalled: false,
          serverRestarts: 0,
          ok: true
        })
        expect(result.kills).toBeGreaterThan(0)
        expect(result.terminations).toBeGreaterThan(0)
        // A terminated connection fails the step it was in (a SqlError) and nothing else: every
        // process reckons with the server's clock, so no ClockRegressed either.
        expect(Object.keys(result.workerErrors).filter((tag) => tag !== "SqlError")).toEqual([])
        expect(summary).toMatch(
          /^kills=[1-9]\d* events=240 acked=240 lost=0 duplicates=0 order_violations=0 inconsistencies=0 .* terminations=[1-9]\d* .*restarts=0 /
        )
        expect(exit.code).toBe(0)
        // The receiver's store is kept (the run prints where) only when something failed.
        fs.rmSync(dir, { recursive: true, force: true })
      } finally {
        child.kill()
        await child.exit
      }
    }, 300_000)
  }
})
