/**
 * SPEC §5 scenarios 13–18: a worker process dies abruptly (`process.exit(73)` from
 * `Faults.exitAt`) at one of the six fault points of a step; the parent inspects both stores
 * after the death, recovers with a fresh process at tick 5, and inspects again.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { EventRecord, ReceiptRecord } from "../../src/index.js"
import { Faults } from "../../src/index.js"
import type { StepSummary } from "./crashChild.js"
import { childScript, spawnChild, withChildren } from "./spawn.js"
import type { ChildExit } from "./spawn.js"
import { createInbox, createQueue, inboxState, queueSnapshot } from "./stores.js"

export type { StepSummary } from "./crashChild.js"

/** The exit code `Faults.exitAt` uses. */
export const CrashExitCode = 73
/** The tick of the crashed step. */
export const CrashTick = 0
/** The tick of the recovery (the seed lease is 5, so a claim at 0 has expired by then). */
export const RecoveryTick = 5
/** The one event of the scenario. */
export const crashEvent = { eventId: "A1", flowId: "A", body: { delta: 7 } } as const

/** What both stores show at one moment. */
export interface CrashObservation {
  readonly clock: { readonly tick: number; readonly ticket: number }
  /** A1 as the queue stores it. */
  readonly event: Pick<EventRecord, "state" | "attempts" | "lifetimeAttempts" | "generation" | "leaseUntil" | "nextAt">
  readonly receipts: ReadonlyArray<ReceiptRecord>
  /** Flow A's counter total, or null when the projection has no row for A. */
  readonly counterTotal: number | null
  /** Flow A's last applied seq at the receiver, or null. */
  readonly lastAppliedSeq: number | null
}

/** Everything one crash scenario showed. */
export interface CrashPointResult {
  readonly point: Faults.FaultPoint
  readonly dir: string
  /** How the crashing worker ended (expected: code 73). */
  readonly crashExit: ChildExit
  /** Set if the worker's step completed instead of dying at `point`. */
  readonly survived: StepSummary | null
  /** Both stores right after the death. */
  readonly before: CrashObservation
  /** The recovery worker's steps at tick 5, up to and including the first `Idle`. */
  readonly recoverySteps: ReadonlyArray<StepSummary>
  readonly recoveryExit: ChildExit
  /** Both stores after the recovery. */
  readonly after: CrashObservation
  readonly elapsedMillis: number
}

const observe = async (queueFile: string, inboxFile: string): Promise<CrashObservation> => {
  const snapshot = await queueSnapshot(queueFile)
  const inbox = await inboxState(inboxFile)
  const event = snapshot.events.find((e) => e.eventId === crashEvent.eventId)
  if (event === undefined) throw new Error(`${queueFile} has no event ${crashEvent.eventId}`)
  return {
    clock: snapshot.clock,
    event: {
      state: event.state,
      attempts: event.attempts,
      lifetimeAttempts: event.lifetimeAttempts,
      generation: event.generation,
      leaseUntil: event.leaseUntil,
      nextAt: event.nextAt
    },
    receipts: inbox.receipts,
    counterTotal: inbox.totals[crashEvent.flowId] ?? null,
    lastAppliedSeq: inbox.progress[crashEvent.flowId] ?? null
  }
}

/** Options of one crash scenario. */
export interface CrashPointOptions {
  /** Where the two store files go. */
  readonly dir: string
  readonly point: Faults.FaultPoint
}

/** Runs one crash scenario in `dir` (queue.db and inbox.db). */
export const runCrashPoint = async (options: CrashPointOptions): Promise<CrashPointResult> => {
  const started = Date.now()
  const queueFile = path.join(options.dir, "queue.db")
  const inboxFile = path.join(options.dir, "inbox.db")
  await createQueue(queueFile, [crashEvent], 0)
  await createInbox(inboxFile)

  const crashing = spawnChild(childScript("crashChild.ts"), ["crash", queueFile, inboxFile, options.point, String(CrashTick)])
  const { crashExit, survived } = await withChildren([crashing], async () => {
    await crashing.expect("started")
    const crashExit = await crashing.exit
    const last = await crashing.next().catch(() => undefined)
    return { crashExit, survived: last?.type === "survived" ? (last.step as StepSummary) : null }
  })
  if (crashExit.code !== CrashExitCode && survived === null) {
    throw new Error(`crash worker at ${options.point} ended with ${JSON.stringify(crashExit)}\n${crashing.stderr()}`)
  }

  const before = await observe(queueFile, inboxFile)

  const recovering = spawnChild(childScript("crashChild.ts"), ["recover", queueFile, inboxFile, String(RecoveryTick)])
  const { recoveryExit, recoverySteps } = await withChildren([recovering], async () => {
    await recovering.expect("started")
    const steps: Array<StepSummary> = []
    for (;;) {
      const message = await recovering.next()
      if (message.type === "recovered") break
      if (message.type !== "step") throw new Error(`recovery worker sent ${JSON.stringify(message)}`)
      steps.push(message.step as StepSummary)
    }
    return { recoverySteps: steps, recoveryExit: await recovering.exit }
  })

  const after = await observe(queueFile, inboxFile)
  return {
    point: options.point,
    dir: options.dir,
    crashExit,
    survived,
    before,
    recoverySteps,
    recoveryExit,
    after,
    elapsedMillis: Date.now() - started
  }
}

/**
 * Runs all six crash scenarios concurrently, each in its own subdirectory of `dir`
 * (named after the point), in `Faults.faultPoints` order.
 */
export const runAllCrashPoints = (options: { readonly dir: string }): Promise<ReadonlyArray<CrashPointResult>> =>
  Promise.all(
    Faults.faultPoints.map((point) => {
      const dir = path.join(options.dir, point.replace(":", "-"))
      fs.mkdirSync(dir, { recursive: true })
      return runCrashPoint({ dir, point })
    })
  )
