/**
 * Scenarios 13–18 of docs/protocol.md: a worker process dies abruptly (`process.exit(73)` from
 * `Faults.exitAt`) at one of the six fault points of a step; the parent inspects both stores
 * after the death, recovers with a fresh process at tick 5, and inspects again. The stores are
 * SQLite files or PostgreSQL schemas (each store then with its own pool in the worker); the
 * observations and the result are the same on both.
 */
import type { EventRecord, ReceiptRecord } from "../../src/index.js"
import { Faults } from "../../src/index.js"
import type { StepSummary } from "./crashChild.js"
import { childScript, spawnChild, withChildren } from "./spawn.js"
import type { ChildExit } from "./spawn.js"
import { backendOf, createInbox, createQueue, inboxState, queueSnapshot } from "./stores.js"
import type { StoreBackend, StoresOption } from "./stores.js"

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

/** The two stores of one scenario (file paths or PostgreSQL URLs). */
export interface CrashStores {
  readonly queue: string
  readonly inbox: string
}

/** Everything one crash scenario showed. */
export interface CrashPointResult {
  readonly point: Faults.FaultPoint
  readonly stores: CrashStores
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
  /** Wall time of the run (of all six scenarios together for `runAllCrashPoints`). */
  readonly elapsedMillis: number
}

interface Scenario {
  readonly point: Faults.FaultPoint
  readonly stores: CrashStores
}

const script = childScript("crashChild.ts")

/** Fresh stores for one scenario, named `<prefix>queue` and `<prefix>inbox`. */
const freshStores = async (backend: StoreBackend, prefix: string): Promise<CrashStores> => ({
  queue: await backend.create(`${prefix}queue`),
  inbox: await backend.create(`${prefix}inbox`)
})

/** Creates both stores (A1 {delta: 7} enqueued at tick 0; an empty inbox). */
const prepare = async ({ stores }: Scenario): Promise<void> => {
  await createQueue(stores.queue, [crashEvent], 0)
  await createInbox(stores.inbox)
}

const observe = async ({ stores }: Scenario): Promise<CrashObservation> => {
  const snapshot = await queueSnapshot(stores.queue)
  const inbox = await inboxState(stores.inbox)
  const event = snapshot.events.find((e) => e.eventId === crashEvent.eventId)
  if (event === undefined) throw new Error(`${stores.queue} has no event ${crashEvent.eventId}`)
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

/** One worker process that must die at `point`. */
const crash = async ({ point, stores }: Scenario) => {
  const crashing = spawnChild(script, ["crash", stores.queue, stores.inbox, point, String(CrashTick)])
  const result = await withChildren([crashing], async () => {
    await crashing.expect("started")
    const crashExit = await crashing.exit
    const last = await crashing.next().catch(() => undefined)
    return { crashExit, survived: last?.type === "survived" ? (last.step as StepSummary) : null }
  })
  if (result.crashExit.code !== CrashExitCode && result.survived === null) {
    throw new Error(`crash worker at ${point} ended with ${JSON.stringify(result.crashExit)}\n${crashing.stderr()}`)
  }
  return result
}

/**
 * One fresh process recovers every scenario's stores in turn at tick 5 (steps until `Idle`, each
 * pair of stores with its own worker). Returns each scenario's steps and the process's exit.
 */
const recover = async (scenarios: ReadonlyArray<Scenario>) => {
  const args = ["recover", String(RecoveryTick), ...scenarios.flatMap(({ stores }) => [stores.queue, stores.inbox])]
  const recovering = spawnChild(script, args)
  return withChildren([recovering], async () => {
    await recovering.expect("started")
    const steps = scenarios.map((): Array<StepSummary> => [])
    for (let done = 0; done < scenarios.length;) {
      const message = await recovering.next()
      const store = typeof message.store === "number" ? steps[message.store] : undefined
      if (message.type === "recovered" && store !== undefined) done++
      else if (message.type === "step" && store !== undefined) store.push(message.step as StepSummary)
      else throw new Error(`recovery worker sent ${JSON.stringify(message)}`)
    }
    return { steps, exit: await recovering.exit }
  })
}

/**
 * Runs the scenarios: prepares their stores, runs the crashing workers concurrently, observes
 * every store, recovers them all with one fresh process, and observes them again.
 */
const run = async (scenarios: ReadonlyArray<Scenario>): Promise<ReadonlyArray<CrashPointResult>> => {
  const started = Date.now()
  await Promise.all(scenarios.map(prepare))
  const crashes = await Promise.all(scenarios.map(crash))
  const before = await Promise.all(scenarios.map(observe))
  const recovered = await recover(scenarios)
  const after = await Promise.all(scenarios.map(observe))
  const elapsedMillis = Date.now() - started
  return scenarios.map((scenario, i) => ({
    ...scenario,
    ...crashes[i]!,
    before: before[i]!,
    recoverySteps: recovered.steps[i]!,
    recoveryExit: recovered.exit,
    after: after[i]!,
    elapsedMillis
  }))
}

/** Options of one crash scenario: where its two stores go, and the point. */
export type CrashPointOptions = StoresOption & { readonly point: Faults.FaultPoint }

/** Runs one crash scenario on fresh stores (in `dir`: queue.db and inbox.db). */
export const runCrashPoint = async (options: CrashPointOptions): Promise<CrashPointResult> => {
  const stores = await freshStores(backendOf(options), "")
  const [result] = await run([{ point: options.point, stores }])
  return result!
}

/**
 * Runs all six crash scenarios, each on its own fresh stores (in `dir`: a subdirectory per point,
 * named after it), in `Faults.faultPoints` order. The six crashing workers run concurrently;
 * after every store was observed, one fresh process recovers the six pairs of stores in turn
 * (which saves five process starts, about a second of CPU each); then every store is observed
 * again.
 */
export const runAllCrashPoints = async (options: StoresOption): Promise<ReadonlyArray<CrashPointResult>> => {
  const backend = backendOf(options)
  const scenarios: Array<Scenario> = []
  for (const point of Faults.faultPoints) {
    scenarios.push({ point, stores: await freshStores(backend, `${point.replace(":", "-")}/`) })
  }
  return run(scenarios)
}
