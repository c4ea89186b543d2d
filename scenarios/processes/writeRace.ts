/**
 * The immediate-transaction proof: several processes, released together, hammer one queue file
 * with write transactions that read before they write (enqueue reads the flow's seq, claim reads
 * the turn order and the head, settle reads the event). Every one of them must succeed and the
 * store must stay consistent: one flow's seqs exactly 1..N, one ticket per claim.
 *
 * Under a deferred `BEGIN`, two such transactions both start as readers; when one of them then
 * tries to write while another writer holds (or has just released) the lock, SQLite answers
 * SQLITE_BUSY at once instead of waiting for the busy timeout, because a reader cannot safely
 * upgrade. `BEGIN IMMEDIATE` takes the write lock first, so the busy timeout covers the whole
 * wait. (Measured: the same race with the deferred transaction fails 800+ of 900 enqueues.)
 */
import * as path from "node:path"
import type { Snapshot } from "../../src/index.js"
import type { WriterReport } from "./writeRaceChild.js"
import { childScript, spawnChild, withChildren } from "./spawn.js"
import { createQueue, queueSnapshot } from "./stores.js"

export type { WriterReport } from "./writeRaceChild.js"

/** Options of the write race. */
export interface WriteRaceOptions {
  readonly dir: string
  /** How many writer processes (default 6). */
  readonly processes?: number | undefined
  /** Events each writer enqueues (default 150). */
  readonly eventsPerProcess?: number | undefined
  /** The one flow they all write to (default "F"). */
  readonly flowId?: string | undefined
}

/** What the write race showed. */
export interface WriteRaceResult {
  readonly file: string
  readonly flowId: string
  readonly reports: ReadonlyArray<WriterReport>
  readonly exitCodes: ReadonlyArray<number | null>
  /** Every error any writer reported, with its index. */
  readonly errors: ReadonlyArray<{ readonly index: number; readonly error: string }>
  /** Seqs handed out to all writers together, sorted. */
  readonly seqs: ReadonlyArray<number>
  /** Claims of all writers together. */
  readonly claimCount: number
  /** The queue file after the race. */
  readonly snapshot: Snapshot
  /** Wall time from the barrier until the last report. */
  readonly raceMillis: number
  /** Wall time of the whole run, process start-up included. */
  readonly elapsedMillis: number
}

/** Runs the write race on a fresh queue file in `dir`. */
export const runWriteRace = async (options: WriteRaceOptions): Promise<WriteRaceResult> => {
  const started = Date.now()
  const count = options.processes ?? 6
  const perProcess = options.eventsPerProcess ?? 150
  const flowId = options.flowId ?? "F"
  const file = path.join(options.dir, "write-race.db")
  await createQueue(file, [], 0)
  const children = Array.from(
    { length: count },
    (_, index) => spawnChild(childScript("writeRaceChild.ts"), [file, String(index), String(perProcess), flowId])
  )
  return withChildren(children, async () => {
    await Promise.all(children.map((child) => child.expect("ready")))
    const released = Date.now()
    for (const child of children) child.send({ cmd: "go" })
    const messages = await Promise.all(children.map((child) => child.expect("report")))
    const raceMillis = Date.now() - released
    const exits = await Promise.all(children.map((child) => child.exit))
    const reports = messages.map((message) => message.report as WriterReport)
    return {
      file,
      flowId,
      reports,
      exitCodes: exits.map((exit) => exit.code),
      errors: reports.flatMap((report) => report.errors.map((error) => ({ index: report.index, error }))),
      seqs: reports.flatMap((report) => report.enqueued.map((e) => e.seq)).sort((a, b) => a - b),
      claimCount: reports.reduce((sum, report) => sum + report.claims.length, 0),
      snapshot: await queueSnapshot(file),
      raceMillis,
      elapsedMillis: Date.now() - started
    }
  })
}
