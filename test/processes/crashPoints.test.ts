/**
 * Scenarios 13–18 of docs/protocol.md, on each backend: a worker process dies with
 * `process.exit(73)` (Faults.exitAt) at each of the six fault points of one step (claim A1
 * {delta: 7} at tick 0 → deliver to the inbox in the same process → settle). The parent inspects both
 * stores after the death, recovers with a fresh process at tick 5 (the seed lease is 5, so a claim
 * made at 0 has expired), and inspects again. On PostgreSQL each store is a fresh schema with its
 * own pool, and at the "before commit" points the process dies with its transaction open (the
 * server rolls it back when the socket closes).
 *
 * The six crashing workers run concurrently (own stores); one fresh recovery process then
 * recovers the six pairs of stores in turn, which saves five process starts (about a second of
 * CPU each). The expectations are docs/protocol.md's table (Crash points) (`crashExpectations` in
 * ./support.ts), the same for both backends.
 */
import { beforeAll, expect, it } from "vitest"
import { Faults } from "../../src/index.js"
import type { CrashPointResult } from "../../scenarios/processes/index.js"
import { runAllCrashPoints } from "../../scenarios/processes/index.js"
import { checkCrashPoint, describeBackends } from "./support.js"

describeBackends("crash points (a worker process exits 73, a fresh one recovers at tick 5)", (backend) => {
  let results: ReadonlyArray<CrashPointResult> = []

  // The stores are removed once every observation was taken.
  beforeAll(async () => {
    results = await backend.withStores((stores) => runAllCrashPoints({ backend: stores }))
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
    checkCrashPoint(resultFor(point), point)
  })
})
