/**
 * Scenario 3 of docs/protocol.md with real OS processes, on each backend: 8 processes released by a
 * stdin barrier each claim once against one queue store holding A1 A2 B1 B2 C1 C2 (all ready at
 * tick 0). On SQLite the store is a file; on PostgreSQL a fresh schema, each process with its own
 * connection pool, the store's advisory lock serializing the claims.
 *
 * The race is repeated (20 rounds on SQLite, 5 on PostgreSQL). Starting a tsx child costs about
 * a second of CPU, so the rounds share one set of 8 processes (each round: a fresh store, every
 * process opens it, barrier, one claim each); the processes exit when the parent closes their
 * stdin. The checks are `checkClaimRaces` in ./support.ts, the same for both backends.
 */
import { it } from "vitest"
import { runClaimRaces } from "../../scenarios/processes/index.js"
import { checkClaimRaces, describeBackends } from "./support.js"

const Rounds = { sqlite: 20, postgres: 5 } as const
const Processes = 8

describeBackends(`claim race (${Processes} OS processes, one queue store)`, (backend) => {
  const rounds = Rounds[backend.name]

  it(`claims exactly A1, B1, C1 in each of ${rounds} rounds; ${Processes - 3} processes get Idle`, async () => {
    const result = await backend.withStores((stores) => runClaimRaces({ backend: stores, processes: Processes, rounds }))
    checkClaimRaces(result, { rounds, processes: Processes })
  }, 120_000)
})
