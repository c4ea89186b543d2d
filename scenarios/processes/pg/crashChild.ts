/**
 * Child of the PostgreSQL crash scenarios (SPEC §5 scenarios 13–18 on PgRelayQueue and PgInbox):
 * a worker with both stores in one process, each store its own pool, delivering through
 * `Transport.layerInbox`. Same modes and messages as `../crashChild.ts`, with URLs for files:
 *
 *   pg/crashChild crash   <queueUrl> <inboxUrl> <point> <tick>
 *     one worker step at `tick` with `Faults.exitAt(point)`: the process exits 73 at `point`,
 *     with any transaction still open on its connections (the server rolls it back when the
 *     socket closes). If the step ever returns, it reports `survived` and exits 0.
 *   pg/crashChild recover <queueUrl> <inboxUrl> <tick>
 *     worker steps at `tick`, without faults, until one is `Idle`; reports each step as it
 *     happens, then `recovered`.
 *   pg/crashChild recover-many <tick> <queueUrl> <inboxUrl> [<queueUrl> <inboxUrl>]...
 *     the same for several pairs of stores in turn, in one process (a process start costs about
 *     a second of CPU); every message carries `store`, the pair's index.
 */
import { Effect, Layer, Ref } from "effect"
// The modules themselves rather than src/index.ts: a child loads less (faster start-up).
import * as PgInbox from "../../../src/layers/PgInbox.js"
import * as PgRelayQueue from "../../../src/layers/PgRelayQueue.js"
import * as Counter from "../../../src/sample/Counter.js"
import * as Faults from "../../../src/services/Faults.js"
import { Relay } from "../../../src/services/Relay.js"
import type { StepResult } from "../../../src/services/Relay.js"
import * as TickClock from "../../../src/services/TickClock.js"
import { Transport } from "../../../src/services/Transport.js"
// Types only: importing a value from ../crashChild.ts would run that child's main.
import type { StepSummary } from "../crashChild.js"
import { emit, runMain } from "../io.js"

/** The sample counter business; the seed's receiver accepts deltas up to 1000. */
const counterBusiness = () => Counter.business(Ref.unsafeMake(1000))

/** Stops a recovery that never goes idle (as in ../crashChild.ts). */
const MaxRecoverySteps = 20

const summarize = (result: StepResult): StepSummary =>
  result._tag === "Idle" ? result : {
    _tag: "Delivered",
    eventId: result.claimed.event.eventId,
    generation: result.claimed.token.generation,
    attempts: result.claimed.event.attempts,
    reply: result.reply._tag,
    outcome: result.outcome._tag
  }

const worker = (queueUrl: string, inboxUrl: string) =>
  Relay.layer.pipe(
    Layer.provide(Transport.layerInbox),
    Layer.provide(
      Layer.merge(
        PgRelayQueue.layer({ url: queueUrl, maxConnections: 2 }),
        PgInbox.layer({ url: inboxUrl, business: counterBusiness(), maxConnections: 2 })
      )
    )
  )

/** Worker steps at `tick` until one is `Idle`, each reported as it happens, then `recovered`. */
const recover = (queueUrl: string, inboxUrl: string, tick: number, tag: Readonly<Record<string, number>>) =>
  Effect.runPromise(Effect.provide(
    Effect.gen(function*() {
      const relay = yield* Relay
      let count = 0
      for (let i = 0; i < MaxRecoverySteps; i++) {
        const step = summarize(yield* relay.step.pipe(TickClock.at(tick)))
        count++
        emit({ type: "step", ...tag, step })
        if (step._tag === "Idle") break
      }
      emit({ type: "recovered", ...tag, count })
    }),
    worker(queueUrl, inboxUrl)
  ))

const isFaultPoint = (value: string): value is Faults.FaultPoint => (Faults.faultPoints as ReadonlyArray<string>).includes(value)

const main = async () => {
  const [mode, queueUrl, inboxUrl, ...rest] = process.argv.slice(2)
  if (queueUrl === undefined || inboxUrl === undefined) throw new Error("usage: pg/crashChild crash|recover <queueUrl> <inboxUrl> ...")
  if (mode === "crash") {
    const [point, tickText] = rest
    if (point === undefined || !isFaultPoint(point)) throw new Error(`unknown fault point ${String(point)}`)
    const tick = Number(tickText ?? "0")
    const program = Effect.gen(function*() {
      const relay = yield* Relay
      emit({ type: "started", pid: process.pid, point, tick })
      return yield* relay.step.pipe(TickClock.at(tick), Effect.provideService(Faults.Faults, Faults.exitAt(point)))
    })
    const result = await Effect.runPromise(Effect.provide(program, worker(queueUrl, inboxUrl)))
    emit({ type: "survived", step: summarize(result) })
    return
  }
  if (mode === "recover") {
    emit({ type: "started", pid: process.pid })
    await recover(queueUrl, inboxUrl, Number(rest[0] ?? "0"), {})
    return
  }
  if (mode === "recover-many") {
    const tick = Number(queueUrl)
    const urls = [inboxUrl, ...rest]
    if (!Number.isInteger(tick) || urls.length % 2 !== 0) throw new Error("usage: pg/crashChild recover-many <tick> (<queueUrl> <inboxUrl>)...")
    emit({ type: "started", pid: process.pid })
    for (let store = 0; store < urls.length / 2; store++) await recover(urls[2 * store]!, urls[2 * store + 1]!, tick, { store })
    return
  }
  throw new Error(`unknown mode ${String(mode)}`)
}

runMain(main)
