/**
 * SPEC §5 scenario 3 on PostgreSQL with real OS processes: 8 processes, each with its own
 * connection pool, released by a stdin barrier, each claim once against one queue store (a fresh
 * schema) holding A1 A2 B1 B2 C1 C2 (all ready at tick 0). The store's advisory lock serializes
 * the claims, so each one sees the claims committed before it.
 *
 * Repeated in 5 rounds (a fresh schema each) by one set of 8 processes.
 */
import { Effect } from "effect"
import { beforeAll, expect, it } from "vitest"
import type { ClaimRacesResult } from "../../scenarios/processes/index.js"
import { runPgClaimRaces } from "../../scenarios/processes/pg/index.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

const Rounds = 5
const Processes = 8

describePg("PostgreSQL claim race (8 OS processes, own pools, one queue schema)", (url) => {
  let result: ClaimRacesResult | undefined

  beforeAll(async () => {
    result = await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const schemas = yield* Effect.forEach(Array.from({ length: Rounds }), () => freshSchema(url))
      return yield* Effect.promise(() => runPgClaimRaces({ urls: schemas.map((s) => s.url), processes: Processes }))
    })))
  }, 120_000)

  it(`claims exactly A1, B1, C1 in each of ${Rounds} rounds; ${Processes - 3} processes get Idle`, () => {
    const { exitCodes, rounds } = result!
    expect(rounds).toHaveLength(Rounds)
    for (const round of rounds) {
      const context = `round ${round.round}: ${JSON.stringify(round.perProcess.map((p) => p.claim))}`
      expect(round.failures, context).toEqual([])
      expect(round.perProcess, context).toHaveLength(Processes)
      expect(new Set(round.perProcess.map((p) => p.pid)).size, context).toBe(Processes)
      expect(round.claimedIds, context).toEqual(["A1", "B1", "C1"])
      expect(round.idleCount, context).toBe(Processes - 3)
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
      // The global (served, flow_id) order: flows tie at served 0, so A, B, C take tickets 1, 2, 3
      // whichever processes won — the same assignment SQLite's single writer gives.
      expect(round.snapshot.flows.map((f) => [f.flowId, f.served]), context).toEqual([["A", 1], ["B", 2], ["C", 3]])
    }
    expect(exitCodes).toEqual(Array.from({ length: Processes }, () => 0))
  })
})
