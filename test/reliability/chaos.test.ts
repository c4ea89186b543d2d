/**
 * The short SIGKILL chaos run (`npm run chaos` with small numbers), end to end through the CLI:
 * 3 worker processes and a producer over one queue file and one receiver file, 6 flows × 40
 * events, SIGKILLs (some while a worker is stopped inside a transaction, some between two
 * commits, some at arbitrary instants), a transport that answers Retry or Gap part of the time.
 * The run checks its invariants on the stores (scenarios/chaos/run.ts); this test checks that it
 * reports no violation, exits 0, and really killed processes.
 *
 * The second run is the same with the worker daemon (`--daemon 4`: `Relay.run({ workers: 4 })` in
 * each worker process, its fibers' settles and claims sharing transactions — group commit); the
 * third with the daemon's default of one worker (`--daemon 1`), which trades each reply for its
 * next head with the queue directly, its delivery under a timer in a fiber of its own.
 *
 * Kills: 12 in `npm test` (each costs a respawn, a tsx start of a few seconds of CPU, which
 * dominates the time); `npm run test:chaos` runs 24. FAIR_RELAY_CHAOS_KILLS sets the number.
 */
import { describe, expect, it } from "vitest"
import { expectClean, runChaos } from "../support/chaos.js"
import { envInt } from "../support/env.js"
import { makeTestDir } from "../support/tmp.js"

const Workers = 3
const Flows = 6
const Events = 40
const Kills = envInt("FAIR_RELAY_CHAOS_KILLS") ?? 12
const size = ["--workers", String(Workers), "--flows", String(Flows), "--events", String(Events), "--kills", String(Kills)]

describe("chaos (short run)", () => {
  it(`${Workers} workers, ${Flows} flows × ${Events} events, ${Kills} SIGKILLs: nothing lost, nothing twice, order kept`, async () => {
    const dir = makeTestDir("chaos")
    const run = await runChaos(dir, size)
    // Four processes contending for two files: every SQLITE_BUSY was waited out, no step failed.
    expect(run.result.workerErrors).toEqual({})
    // The transport really answered Retry and Gap.
    expect(run.result.replies["synthetic Retry"] ?? 0).toBeGreaterThan(0)
    expect(run.result.replies["synthetic Gap"] ?? 0).toBeGreaterThan(0)
    expectClean(dir, run, Flows * Events)
  }, 300_000)

  const daemons = [
    { workers: 4, title: "the worker daemon, 4 fibers per process sharing their transactions" },
    { workers: 1, title: "the worker daemon with one worker (its default)" }
  ]
  for (const daemon of daemons) {
    it(`${daemon.title}, ${Kills} SIGKILLs: the same`, async () => {
      const dir = makeTestDir(`chaos-daemon-${daemon.workers}`)
      const run = await runChaos(dir, [...size, "--daemon", String(daemon.workers)])
      // No exchange failed and no delivery went without a reply (the daemon logs either as a warning).
      expect(run.result.workerErrors).toEqual({})
      expect(run.result.replies["synthetic Retry"] ?? 0).toBeGreaterThan(0)
      expect(run.result.replies["Accepted"] ?? 0).toBeGreaterThan(0)
      expect(run.summary).toMatch(new RegExp(` daemon_workers=${daemon.workers} `))
      expectClean(dir, run, Flows * Events)
    }, 300_000)
  }
})
