/**
 * Child of the crash scenarios (SPEC §5 scenarios 13–18). A worker with the queue file and the
 * inbox file (the counter business) in one process, delivering through `Transport.layerInbox`.
 *
 *   crashChild crash   <queueFile> <inboxFile> <point> <tick>
 *     one worker step at `tick` with `Faults.exitAt(point)`: the process exits 73 at `point`.
 *     If the step ever returns, it reports `survived` and exits 0.
 *   crashChild recover <queueFile> <inboxFile> <tick>
 *     worker steps at `tick`, without faults, until one is `Idle`; reports each step as it
 *     happens, then `recovered`.
 */
import { Effect, Layer } from "effect"
import type { StepResult } from "../../src/index.js"
import { Faults, Relay, SqliteInbox, SqliteRelayQueue, TickClock, Transport } from "../../src/index.js"
import { emit, runMain } from "./io.js"
import { counterBusiness } from "./stores.js"

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
export const MaxRecoverySteps = 20

const summarize = (result: StepResult): StepSummary =>
  result._tag === "Idle" ? result : {
    _tag: "Delivered",
    eventId: result.claimed.event.eventId,
    generation: result.claimed.token.generation,
    attempts: result.claimed.event.attempts,
    reply: result.reply._tag,
    outcome: result.outcome._tag
  }

const worker = (queueFile: string, inboxFile: string) =>
  Relay.layer.pipe(
    Layer.provide(Transport.layerInbox),
    Layer.provide(
      Layer.merge(
        SqliteRelayQueue.layer({ filename: queueFile }),
        SqliteInbox.layer({ filename: inboxFile, business: counterBusiness() })
      )
    )
  )

const isFaultPoint = (value: string): value is Faults.FaultPoint => (Faults.faultPoints as ReadonlyArray<string>).includes(value)

const main = async () => {
  const [mode, queueFile, inboxFile, ...rest] = process.argv.slice(2)
  if (queueFile === undefined || inboxFile === undefined) throw new Error("usage: crashChild crash|recover <queue> <inbox> ...")
  if (mode === "crash") {
    const [point, tickText] = rest
    if (point === undefined || !isFaultPoint(point)) throw new Error(`unknown fault point ${String(point)}`)
    const tick = Number(tickText ?? "0")
    const program = Effect.gen(function*() {
      const relay = yield* Relay
      emit({ type: "started", pid: process.pid, point, tick })
      return yield* relay.step.pipe(TickClock.at(tick), Effect.provideService(Faults.Faults, Faults.exitAt(point)))
    })
    const result = await Effect.runPromise(Effect.provide(program, worker(queueFile, inboxFile)))
    emit({ type: "survived", step: summarize(result) })
    return
  }
  if (mode === "recover") {
    const tick = Number(rest[0] ?? "0")
    const program = Effect.gen(function*() {
      const relay = yield* Relay
      emit({ type: "started", pid: process.pid, tick })
      const steps: Array<StepSummary> = []
      for (let i = 0; i < MaxRecoverySteps; i++) {
        const step = summarize(yield* relay.step.pipe(TickClock.at(tick)))
        steps.push(step)
        emit({ type: "step", step })
        if (step._tag === "Idle") break
      }
      return steps
    })
    const steps = await Effect.runPromise(Effect.provide(program, worker(queueFile, inboxFile)))
    emit({ type: "recovered", count: steps.length })
    return
  }
  throw new Error(`unknown mode ${String(mode)}`)
}

runMain(main)
