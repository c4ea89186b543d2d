/**
 * SPEC §5 scenario 3 with real OS processes: 8 processes released by a barrier each claim once
 * against one queue file holding A1 A2 B1 B2 C1 C2 (all ready at tick 0).
 *
 * The race is repeated 20 times. Starting a tsx child costs about a second of CPU, so the 20
 * rounds share one set of 8 processes (each round: a fresh queue file, every process opens it,
 * barrier, one claim each); the processes exit when the parent closes their stdin.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { runClaimRaces } from "../../scenarios/processes/index.js"

const Rounds = 20
const Processes = 8

describe("claim race (8 OS processes, one queue file)", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "fair-relay-claim-race-"))
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

  it(`claims exactly A1, B1, C1 in each of ${Rounds} rounds`, async () => {
    const { exitCodes, rounds } = await runClaimRaces({ dir, processes: Processes, rounds: Rounds })
    expect(rounds).toHaveLength(Rounds)
    for (const round of rounds) {
      const context = `round ${round.round}: ${JSON.stringify(round.perProcess.map((p) => p.claim))}`
      expect(round.failures, context).toEqual([])
      expect(round.perProcess, context).toHaveLength(Processes)
      expect(round.claimedIds, context).toEqual(["A1", "B1", "C1"])
      expect(round.idleCount, context).toBe(Processes - 3)
      for (const { claim } of round.perProcess) {
        if (claim._tag === "Claimed") {
          expect(["A2", "B2", "C2"]).not.toContain(claim.eventId)
          expect(claim).toMatchObject({ seq: 1, generation: 1, leaseUntil: 5 })
        }
      }
      // The parent's view of the file after the race.
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
      // Three claims, three distinct tickets: the served values are a permutation of 1..3.
      expect(round.snapshot.flows.map((f) => f.served).sort(), context).toEqual([1, 2, 3])
    }
    expect(exitCodes).toEqual(Array.from({ length: Processes }, () => 0))
  }, 120_000)
})
