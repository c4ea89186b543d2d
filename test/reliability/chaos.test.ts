/**
 * The short SIGKILL chaos run (`npm run chaos` with small numbers), end to end through the CLI:
 * 3 worker processes and a producer over one queue file and one receiver file, 6 flows × 40
 * events, SIGKILLs (some while a worker is stopped inside a transaction, some between two
 * commits, some at arbitrary instants), a transport that answers Retry or Gap part of the time.
 * The run checks its invariants on the stores (scenarios/chaos/run.ts); this test checks that it
 * reports no violation, exits 0, and really killed processes.
 *
 * Kills: 12 in `npm test` (each costs a respawn, a tsx start of a few seconds of CPU, which
 * dominates the time); `npm run test:chaos` runs 24. FAIR_RELAY_CHAOS_KILLS sets the number.
 */
import { describe, expect, it } from "vitest"
import * as fs from "node:fs"
import { fileURLToPath } from "node:url"
import type { ChaosResult } from "../../scenarios/chaos/run.js"
import { spawnChild } from "../../scenarios/processes/spawn.js"
import { envInt } from "../support/env.js"
import { makeTestDir } from "../support/tmp.js"

const main = fileURLToPath(new URL("../../scenarios/chaos/main.ts", import.meta.url))

const Workers = 3
const Flows = 6
const Events = 40
const Kills = envInt("FAIR_RELAY_CHAOS_KILLS") ?? 12

describe("chaos (short run)", () => {
  it(`${Workers} workers, ${Flows} flows × ${Events} events, ${Kills} SIGKILLs: nothing lost, nothing twice, order kept`, async () => {
    const dir = makeTestDir("chaos")
    const child = spawnChild(main, [
      "--dir", dir,
      "--workers", String(Workers),
      "--flows", String(Flows),
      "--events", String(Events),
      "--kills", String(Kills),
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
        ok: true
      })
      expect(result.kills).toBeGreaterThan(0)
      // Four processes contending for two files: every SQLITE_BUSY was waited out, no step failed.
      expect(result.workerErrors).toEqual({})
      // The transport really answered Retry and Gap.
      expect(result.replies["synthetic Retry"] ?? 0).toBeGreaterThan(0)
      expect(result.replies["synthetic Gap"] ?? 0).toBeGreaterThan(0)
      expect(summary).toMatch(/^kills=[1-9]\d* events=240 acked=240 lost=0 duplicates=0 order_violations=0 /)
      expect(exit.code).toBe(0)
      // The stores are kept (the run prints where) only when something failed.
      fs.rmSync(dir, { recursive: true, force: true })
    } finally {
      child.kill()
      await child.exit
    }
  }, 300_000)
})
