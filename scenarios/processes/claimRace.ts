/**
 * Scenario 3 of docs/protocol.md, with real OS processes: N children open one queue store holding
 * flows A, B and C (two events each, all ready at tick 0), wait at a barrier, then each claims
 * once. The store is a SQLite file or a PostgreSQL schema (each child then has its own connection
 * pool); the messages and the result are the same on both.
 */
import type { EnqueueInput, Snapshot } from "../../src/index.js"
import type { RaceClaim } from "./claimRaceChild.js"
import { childScript, spawnChild, withChildren } from "./spawn.js"
import type { Child } from "./spawn.js"
import { backendOf, createQueue, queueSnapshot } from "./stores.js"
import type { StoresOption } from "./stores.js"

export type { RaceClaim } from "./claimRaceChild.js"

/** The race's queue: A1 A2 B1 B2 C1 C2, enqueued at tick 0. */
export const raceEvents: ReadonlyArray<EnqueueInput> = ["A", "B", "C"].flatMap((flowId) =>
  [1, 2].map((n) => ({ eventId: `${flowId}${n}`, flowId, body: { delta: n } }))
)

/**
 * Options of a race: where the queue stores go (one per round: `dir/claim-race-<round>.db`, or a
 * fresh store of `backend` named `claim-race-<round>`), and how many processes race (default 8).
 */
export type ClaimRaceOptions = StoresOption & { readonly processes?: number | undefined }

/** One process's part in one round. */
export interface ProcessClaim {
  /** Index of the process among the racers. */
  readonly index: number
  readonly pid: number
  readonly claim: RaceClaim
}

/** What one round showed. */
export interface ClaimRaceRound {
  readonly round: number
  /** The round's queue store (a file path or a PostgreSQL URL). */
  readonly store: string
  /** Ids claimed by any process, sorted. */
  readonly claimedIds: ReadonlyArray<string>
  /** Processes that got `Idle`. */
  readonly idleCount: number
  /** Processes whose claim failed (an error; expected none). */
  readonly failures: ReadonlyArray<{ readonly index: number; readonly error: string }>
  readonly perProcess: ReadonlyArray<ProcessClaim>
  /** The queue store read by the parent after every racer reported. */
  readonly snapshot: Snapshot
}

/** A single race with fresh processes that exit afterwards. */
export interface ClaimRaceResult extends ClaimRaceRound {
  /** Exit code of each process, by index. */
  readonly exitCodes: ReadonlyArray<number | null>
}

/** Several rounds raced by one set of processes. */
export interface ClaimRacesResult {
  readonly rounds: ReadonlyArray<ClaimRaceRound>
  /** Exit code of each process, by index, after the last round. */
  readonly exitCodes: ReadonlyArray<number | null>
  /** Wall time of the whole run, process start-up included. */
  readonly elapsedMillis: number
}

const raceRound = async (children: ReadonlyArray<Child>, store: string, round: number): Promise<ClaimRaceRound> => {
  await createQueue(store, raceEvents, 0)
  for (const child of children) child.send({ cmd: "race", store, round })
  // Everyone has the store open (a PostgreSQL pool connected, the migrations checked) before anyone claims.
  await Promise.all(children.map((child) => child.expect("ready")))
  for (const child of children) child.send({ cmd: "go" })
  const messages = await Promise.all(children.map((child) => child.expect("claim")))
  const perProcess = messages.map((message, index): ProcessClaim => {
    if (message.round !== round) throw new Error(`process ${index} answered round ${String(message.round)} in round ${round}`)
    return { index, pid: children[index]!.pid, claim: message.claim as RaceClaim }
  })
  const claimedIds = perProcess.flatMap(({ claim }) => (claim._tag === "Claimed" ? [claim.eventId] : [])).sort()
  return {
    round,
    store,
    claimedIds,
    idleCount: perProcess.filter(({ claim }) => claim._tag === "Idle").length,
    failures: perProcess.flatMap(({ claim, index }) => (claim._tag === "Failed" ? [{ index, error: claim.error }] : [])),
    perProcess,
    snapshot: await queueSnapshot(store)
  }
}

/**
 * Runs `rounds` races with the same `processes` children, each round on a fresh queue store.
 * Reusing the children keeps many rounds cheap: starting a tsx child costs about a second of CPU,
 * while a round costs a few milliseconds. Every round is still a race of separate OS processes
 * on one store.
 */
export const runClaimRaces = async (options: ClaimRaceOptions & { readonly rounds: number }): Promise<ClaimRacesResult> => {
  const started = Date.now()
  const count = options.processes ?? 8
  const backend = backendOf(options)
  const children = Array.from({ length: count }, () => spawnChild(childScript("claimRaceChild.ts")))
  return withChildren(children, async () => {
    const rounds: Array<ClaimRaceRound> = []
    for (let round = 1; round <= options.rounds; round++) {
      rounds.push(await raceRound(children, await backend.create(`claim-race-${round}`), round))
    }
    for (const child of children) child.end()
    const exits = await Promise.all(children.map((child) => child.exit))
    return { rounds, exitCodes: exits.map((exit) => exit.code), elapsedMillis: Date.now() - started }
  })
}

/** One race (scenario 3 of docs/protocol.md): fresh processes claim once each, then exit. */
export const runClaimRace = async (options: ClaimRaceOptions): Promise<ClaimRaceResult> => {
  const { exitCodes, rounds } = await runClaimRaces({ ...options, rounds: 1 })
  return { ...rounds[0]!, exitCodes }
}
