/**
 * SPEC §5 scenario 3, with real OS processes: N children open one queue file holding flows A, B
 * and C (two events each, all ready at tick 0), wait at a barrier, then each claims once.
 */
import * as path from "node:path"
import type { EnqueueInput, Snapshot } from "../../src/index.js"
import type { RaceClaim } from "./claimRaceChild.js"
import { childScript, spawnChild, withChildren } from "./spawn.js"
import type { Child } from "./spawn.js"
import { createQueue, queueSnapshot } from "./stores.js"

export type { RaceClaim } from "./claimRaceChild.js"

/** The race's queue: A1 A2 B1 B2 C1 C2, enqueued at tick 0. */
export const raceEvents: ReadonlyArray<EnqueueInput> = ["A", "B", "C"].flatMap((flowId) =>
  [1, 2].map((n) => ({ eventId: `${flowId}${n}`, flowId, body: { delta: n } }))
)

/** Options of a race. */
export interface ClaimRaceOptions {
  /** Where the queue files go (one per round). */
  readonly dir: string
  /** How many processes race (default 8). */
  readonly processes?: number | undefined
}

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
  readonly file: string
  /** Ids claimed by any process, sorted. */
  readonly claimedIds: ReadonlyArray<string>
  /** Processes that got `Idle`. */
  readonly idleCount: number
  /** Processes whose claim failed (an error; expected none). */
  readonly failures: ReadonlyArray<{ readonly index: number; readonly error: string }>
  readonly perProcess: ReadonlyArray<ProcessClaim>
  /** The queue file read by the parent after every racer reported. */
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

const raceRound = async (children: ReadonlyArray<Child>, dir: string, round: number): Promise<ClaimRaceRound> => {
  const file = path.join(dir, `claim-race-${round}.db`)
  await createQueue(file, raceEvents, 0)
  for (const child of children) child.send({ cmd: "race", file, round })
  // Everyone has the file open before anyone claims.
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
    file,
    claimedIds,
    idleCount: perProcess.filter(({ claim }) => claim._tag === "Idle").length,
    failures: perProcess.flatMap(({ claim, index }) => (claim._tag === "Failed" ? [{ index, error: claim.error }] : [])),
    perProcess,
    snapshot: await queueSnapshot(file)
  }
}

/**
 * Runs `rounds` races with the same `processes` children, each round on a fresh queue file
 * (`dir/claim-race-<round>.db`). Reusing the children keeps many rounds cheap: starting a tsx
 * child costs about a second of CPU, while a round costs a few milliseconds. Every round is
 * still a race of separate OS processes on one file.
 */
export const runClaimRaces = async (options: ClaimRaceOptions & { readonly rounds: number }): Promise<ClaimRacesResult> => {
  const started = Date.now()
  const count = options.processes ?? 8
  const children = Array.from({ length: count }, () => spawnChild(childScript("claimRaceChild.ts")))
  return withChildren(children, async () => {
    const rounds: Array<ClaimRaceRound> = []
    for (let round = 1; round <= options.rounds; round++) rounds.push(await raceRound(children, options.dir, round))
    for (const child of children) child.end()
    const exits = await Promise.all(children.map((child) => child.exit))
    return { rounds, exitCodes: exits.map((exit) => exit.code), elapsedMillis: Date.now() - started }
  })
}

/** One race (SPEC §5 scenario 3): fresh processes claim once each, then exit. */
export const runClaimRace = async (options: ClaimRaceOptions): Promise<ClaimRaceResult> => {
  const { exitCodes, rounds } = await runClaimRaces({ ...options, rounds: 1 })
  return { ...rounds[0]!, exitCodes }
}
