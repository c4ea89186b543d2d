/**
 * SPEC §5 scenario 3 on PostgreSQL, with real OS processes: N children, each with its own
 * connection pool, open one queue store (a schema) holding flows A, B and C (two events each,
 * all ready at tick 0), wait at a barrier, then each claims once. Same messages, same result
 * shape as the SQLite race in `../claimRace.ts`.
 */
import type { ClaimRaceRound, ClaimRacesResult, ProcessClaim, RaceClaim } from "../claimRace.js"
import { raceEvents } from "../claimRace.js"
import { childScript, spawnChild, withChildren } from "../spawn.js"
import type { Child } from "../spawn.js"
import { createPgQueue, pgQueueSnapshot } from "./stores.js"

/** Options of a PostgreSQL race. */
export interface PgClaimRaceOptions {
  /**
   * One queue store per round, each a URL naming an empty schema (the caller creates and drops
   * them); the number of rounds is the number of URLs.
   */
  readonly urls: ReadonlyArray<string>
  /** How many processes race (default 8). */
  readonly processes?: number | undefined
}

const raceRound = async (children: ReadonlyArray<Child>, url: string, round: number): Promise<ClaimRaceRound> => {
  await createPgQueue(url, raceEvents, 0)
  for (const child of children) child.send({ cmd: "race", url, round })
  // Everyone has its pool open (and has checked the migrations) before anyone claims.
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
    file: url,
    claimedIds,
    idleCount: perProcess.filter(({ claim }) => claim._tag === "Idle").length,
    failures: perProcess.flatMap(({ claim, index }) => (claim._tag === "Failed" ? [{ index, error: claim.error }] : [])),
    perProcess,
    snapshot: await pgQueueSnapshot(url)
  }
}

/**
 * Runs one race per URL with the same `processes` children (starting a tsx child costs about a
 * second of CPU; a round costs milliseconds). Every round is still a race of separate OS
 * processes, each on its own PostgreSQL connection, against one store. `file` in each round is
 * the store's URL.
 */
export const runPgClaimRaces = async (options: PgClaimRaceOptions): Promise<ClaimRacesResult> => {
  const started = Date.now()
  const count = options.processes ?? 8
  const children = Array.from({ length: count }, () => spawnChild(childScript("pg/claimRaceChild.ts")))
  return withChildren(children, async () => {
    const rounds: Array<ClaimRaceRound> = []
    for (const [i, url] of options.urls.entries()) rounds.push(await raceRound(children, url, i + 1))
    for (const child of children) child.end()
    const exits = await Promise.all(children.map((child) => child.exit))
    return { rounds, exitCodes: exits.map((exit) => exit.code), elapsedMillis: Date.now() - started }
  })
}
