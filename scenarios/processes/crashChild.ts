/**
 * Child of the crash scenarios (scenarios 13–18 of docs/protocol.md), on either backend. A worker
 * with the queue store and the inbox store (the counter business) in one process, delivering
 * through `Transport.layerInbox`. A store is a SQLite file or a PostgreSQL URL (each store then has
 * a pool of its own).
 *
 *   crashChild crash   <queue> <inbox> <point> <tick>
 *     one worker step at `tick` with `Faults.exitAt(point)`: the process exits 73 at `point`
 *     (on PostgreSQL with any transaction still open on its connections; the server rolls it back
 *     when the socket closes). If the step ever returns, it reports `survived` and exits 0.
 *   crashChild recover <tick> <queue> <inbox> [<queue> <inbox>]...
 *     for each pair of stores in turn (a process start costs about a second of CPU): worker
 *     steps at `tick`, without faults, until one is `Idle`, each reported as it happens, then
 *     `recovered`. Every message carries `store`, the pair's index.
 */
import { Effect, Layer } from "effect"
// The modules themselves rather than src/index.ts: a child loads less (faster start-up).
import * as Faults from "../../src/services/Faults.js"
import { Relay } from "../../src/services/Relay.js"
import type { StepResult } from "../../src/services/Relay.js"
import * as TickClock from "../../src/services/TickClock.js"
import { Transport } from "../../src/services/Transport.js"
import { emit, runMain } from "./io.js"
import { counterBusiness, inboxLayer, queueLayer } from "./stores.js"

/** One worker step, as the child reports it. */
export type StepSummary =
  | { readonly _tag: "Idle" }
  | {
    readonly _tag: "Delivered"
    readonly eventId: string
    readonly generation: number
    readonly attempts: number
    readonly reply: string
    readonly outcome: string
  }

/** Stops a recovery that never goes idle. */
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

/** A worker over the two stores; on PostgreSQL each store has a pool of two connections. */
const worker = (queue: string, inbox: string) =>
  Relay.layer.pipe(
    Layer.provide(Transport.layerInbox),
    Layer.provide(
      Layer.merge(
        queueLayer(queue, { maxConnections: 2 }),
        inboxLayer(inbox, counterBusiness(), { maxConnections: 2 })
      )
    )
  )

/** Worker steps at `tick` until one is `Idle`, each reported as it happens, then `recovered`. */
const recover = (queue: string, inbox: string, tick: number, store: number) =>
  Effect.runPromise(Effect.provide(
    Effect.gen(function*() {
      const relay = yield* Relay
      let count = 0
      for (let i = 0; i < MaxRecoverySteps; i++) {
        const step = summarize(yield* relay.step.pipe(TickClock.at(tick)))
        count++
        emit({ type: "step", store, step })
        if (step._tag === "Idle") break
      }
      emit({ type: "recovered", store, count })
    }),
    worker(queue, inbox)
  ))

const isFaultPoint = (value: string): value is Faults.FaultPoint => (Faults.faultPoints as ReadonlyArray<string>).includes(value)

const main = async () => {
  const [mode, ...args] = process.argv.slice(2)
  if (mode === "crash") {
    const [queue, inbox, point, tickText] = args
    if (queue === undefined || inbox === undefined) throw new Error("usage: crashChild crash <queue> <inbox> <point> <tick>")
    if (point === undefined || !isFaultPoint(point)) throw new Error(`unknown fault point ${String(point)}`)
    const tick = Number(tickText ?? "0")
    const program = Effect.gen(function*() {
      const relay = yield* Relay
      emit({ type: "started", pid: process.pid, point, tick })
      return yield* relay.step.pipe(TickClock.at(tick), Effect.provideService(Faults.Faults, Faults.exitAt(point)))
    })
    const result = await Effect.runPromise(Effect.provide(program, worker(queue, inbox)))
    emit({ type: "survived", step: summarize(result) })
    return
  }
  if (mode === "recover") {
    const [tickText, ...stores] = args
    const tick = Number(tickText)
    if (!Number.isInteger(tick) || stores.length === 0 || stores.length % 2 !== 0) {
      throw new Error("usage: crashChild recover <tick> <queue> <inbox> [<queue> <inbox>]...")
    }
    emit({ type: "started", pid: process.pid, tick })
    for (let store = 0; store < stores.length / 2; store++) await recover(stores[2 * store]!, stores[2 * store + 1]!, tick, store)
    return
  }
  throw new Error(`unknown mode ${String(mode)}`)
}

runMain(main)
