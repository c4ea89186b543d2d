/**
 * SPEC §5 scenarios 13–18 on PostgreSQL: a worker process (PgRelayQueue + PgInbox, each its own
 * pool) dies with `process.exit(73)` at one of the six fault points of a step; the parent
 * inspects both stores after the death, recovers with a fresh process at tick 5, and inspects
 * again. Same observations and result shape as `../crashPoint.ts`; `dir` holds the queue URL.
 */
import { Faults } from "../../../src/index.js"
import type { CrashObservation, CrashPointResult, StepSummary } from "../crashPoint.js"
import { CrashExitCode, crashEvent, CrashTick, RecoveryTick } from "../crashPoint.js"
import { childScript, spawnChild, withChildren } from "../spawn.js"
import { createPgInbox, createPgQueue, pgInboxState, pgQueueSnapshot } from "./stores.js"

/** The two stores of one scenario: URLs naming empty schemas (the caller creates and drops them). */
export interface PgCrashStores {
  readonly queueUrl: string
  readonly inboxUrl: string
}

const observe = async ({ inboxUrl, queueUrl }: PgCrashStores): Promise<CrashObservation> => {
  const snapshot = await pgQueueSnapshot(queueUrl)
  const inbox = await pgInboxState(inboxUrl)
  const event = snapshot.events.find((e) => e.eventId === crashEvent.eventId)
  if (event === undefined) throw new Error(`queue store has no event ${crashEvent.eventId}`)
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

const script = childScript("pg/crashChild.ts")

/** Creates both stores (A1 {delta: 7} enqueued at tick 0; an empty inbox). */
const prepare = async ({ inboxUrl, queueUrl }: PgCrashStores): Promise<void> => {
  await createPgQueue(queueUrl, [crashEvent], 0)
  await createPgInbox(inboxUrl)
}

/** One worker process that must die at `point`. */
const crash = async ({ inboxUrl, point, queueUrl }: PgCrashStores & { readonly point: Faults.FaultPoint }) => {
  const crashing = spawnChild(script, ["crash", queueUrl, inboxUrl, point, String(CrashTick)])
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
 * One fresh process recovers every pair of stores in turn at tick 5 (steps until `Idle`). Returns
 * each pair's steps and the process's exit.
 */
const recover = async (stores: ReadonlyArray<PgCrashStores>) => {
  const args = stores.length === 1
    ? ["recover", stores[0]!.queueUrl, stores[0]!.inboxUrl, String(RecoveryTick)]
    : ["recover-many", String(RecoveryTick), ...stores.flatMap((s) => [s.queueUrl, s.inboxUrl])]
  const recovering = spawnChild(script, args)
  return withChildren([recovering], async () => {
    await recovering.expect("started")
    const steps = stores.map((): Array<StepSummary> => [])
    for (let done = 0; done < stores.length;) {
      const message = await recovering.next()
      const store = typeof message.store === "number" ? message.store : 0
      if (message.type === "recovered") done++
      else if (message.type === "step" && steps[store] !== undefined) steps[store].push(message.step as StepSummary)
      else throw new Error(`recovery worker sent ${JSON.stringify(message)}`)
    }
    return { steps, exit: await recovering.exit }
  })
}

/** Runs one crash scenario on the two stores: crash, observe, recover in a fresh process, observe. */
export const runPgCrashPoint = async (stores: PgCrashStores & { readonly point: Faults.FaultPoint }): Promise<CrashPointResult> => {
  const started = Date.now()
  await prepare(stores)
  const { crashExit, survived } = await crash(stores)
  const before = await observe(stores)
  const recovered = await recover([stores])
  const after = await observe(stores)
  return {
    point: stores.point,
    dir: stores.queueUrl,
    crashExit,
    survived,
    before,
    recoverySteps: recovered.steps[0]!,
    recoveryExit: recovered.exit,
    after,
    elapsedMillis: Date.now() - started
  }
}

/**
 * Runs all six crash scenarios, each on its own stores, `Faults.faultPoints` order: the six
 * crashing workers run concurrently; after every store was observed, one fresh process recovers
 * the six pairs of stores in turn (each with its own pools, at tick 5); then every store is
 * observed again. `elapsedMillis` is the whole run's.
 */
export const runAllPgCrashPoints = async (
  storesFor: (point: Faults.FaultPoint) => PgCrashStores
): Promise<ReadonlyArray<CrashPointResult>> => {
  const started = Date.now()
  const scenarios = Faults.faultPoints.map((point) => ({ ...storesFor(point), point }))
  await Promise.all(scenarios.map(prepare))
  const crashes = await Promise.all(scenarios.map(crash))
  const before = await Promise.all(scenarios.map(observe))
  const recovered = await recover(scenarios)
  const after = await Promise.all(scenarios.map(observe))
  const elapsedMillis = Date.now() - started
  return scenarios.map((scenario, i) => ({
    point: scenario.point,
    dir: scenario.queueUrl,
    ...crashes[i]!,
    before: before[i]!,
    recoverySteps: recovered.steps[i]!,
    recoveryExit: recovered.exit,
    after: after[i]!,
    elapsedMillis
  }))
}
