/**
 * A chaos worker process: `node --import tsx scenarios/chaos/worker.ts '<config json>'`.
 *
 * Runs the real worker (`Relay.step`: claim → deliver → settle) in a loop — or, with `daemon`, the
 * worker daemon `Relay.run({ workers: daemon, batchSize: 1 })`, whose worker fibers share their
 * queue transactions (group commit) — against the run's queue
 * (a SQLite file, or PostgreSQL with the server's clock: stores.ts) and one inbox file, with real
 * time (milliseconds). Its transport answers `Retry` or `Gap` for a fraction of deliveries before
 * the receiver's store is touched; otherwise it calls the real inbox (which answers `Gap` by
 * itself on an out-of-order seq).
 *
 * At each fault point of the worker's path (just before / after each commit), with probability
 * `pauseRate`, it stops and asks the parent (`{type: "at", point}`) — inside the transaction for
 * the `*:before-commit` points — and waits for `{cmd: "continue"}`. The parent either answers or
 * SIGKILLs it right there, which is how kills land mid-transaction for certain.
 *
 * stdout (JSON lines): `ready`, `at`, `step` (one per delivered step: reply and outcome tags,
 * whether the reply was synthetic; the daemon reports each reply as its transport gives it, without
 * the outcome, which its workers do not hand out), `error` (a step that failed; the loop goes on —
 * on PostgreSQL a terminated connection or a restarting server fails the step with a `SqlError`,
 * the pool opens a new connection for the next one, so the worker keeps running; the daemon's
 * failures are the warnings it logs with a cause: a failed exchange, a delivery without a reply).
 * stdin: `{cmd: "continue"}` after an `at`; `{cmd: "stop"}` or end of input: finish the current
 * step and exit 0.
 */
import { Cause, Context, Effect, Fiber, Layer, Logger, LogLevel, Option } from "effect"
import type { DeliveryReply } from "../../src/index.js"
import { DeliveryFailed, Faults, Inbox, Relay, RelayQueue, SqliteInbox, Transport } from "../../src/index.js"
import { describeError, emit, runMain } from "../processes/io.js"
import { business, prng } from "./business.js"
import { openQueue } from "./stores.js"
import type { QueueStore } from "./stores.js"

/** What the parent tells a worker. */
export interface WorkerConfig {
  readonly queue: QueueStore
  readonly inboxFile: string
  readonly seed: number
  /** Fraction of deliveries answered `Retry` without reaching the receiver. */
  readonly retryRate: number
  /** Fraction of deliveries answered `Gap` without reaching the receiver. */
  readonly gapRate: number
  /** Probability of stopping at a fault point to let the parent decide. */
  readonly pauseRate: number
  readonly leaseMs: number
  readonly backoffBaseMs: number
  readonly backoffCapMs: number
  /** The inbox file's busy timeout. */
  readonly busyTimeoutMs: number
  /** What a write does with a clock below the persisted tick (see RelayPolicy.clock). */
  readonly clock: "strict" | "clamp"
  /** Run the daemon with this many worker fibers instead of `Relay.step` in a loop. */
  readonly daemon?: number | undefined
}

/** The reason a synthetic `Retry` carries. */
export const SyntheticRetry = "chaos: receiver unavailable"

const stdinControl = () => {
  let stopped = false
  // Fibers stopped at a fault point, in the order they asked (the daemon's fibers may ask together).
  const pending: Array<() => void> = []
  const onStop: Array<() => void> = []
  const stop = () => {
    stopped = true
    for (const resume of onStop.splice(0)) resume()
  }
  let buffer = ""
  process.stdin.setEncoding("utf8")
  process.stdin.on("data", (chunk: string) => {
    buffer += chunk
    let newline = buffer.indexOf("\n")
    while (newline >= 0) {
      const line = buffer.slice(0, newline)
      buffer = buffer.slice(newline + 1)
      newline = buffer.indexOf("\n")
      const command = JSON.parse(line) as { cmd?: string }
      if (command.cmd === "continue") {
        pending.shift()?.()
      } else if (command.cmd === "stop") {
        stop()
      }
    }
  })
  process.stdin.on("end", () => {
    stop()
    for (const resume of pending.splice(0)) resume()
  })
  return {
    isStopped: () => stopped,
    /** Waits for the parent's "continue" (or the end of stdin). */
    waitForContinue: () =>
      Effect.async<void>((resume) => {
        if (stopped) return resume(Effect.void)
        pending.push(() => resume(Effect.void))
      }),
    /** Waits for "stop" (or the end of stdin). */
    waitForStop: Effect.async<void>((resume) => {
      if (stopped) return resume(Effect.void)
      onStop.push(() => resume(Effect.void))
    })
  }
}

/** The daemon's failures, as the step loop reports its own: a warning with a cause, by the failure's tag. */
const reportFailures = Logger.make(({ cause, logLevel, message }) => {
  if (!LogLevel.greaterThanEqual(logLevel, LogLevel.Warning) || Cause.isEmpty(cause) || Cause.isInterruptedOnly(cause)) return
  const failure = Cause.failureOption(cause)
  const tag = Option.isSome(failure) ? (failure.value as { _tag?: string })._tag ?? "unknown" : "defect"
  emit({ type: "error", tag, message: `${String(message)}: ${Cause.pretty(cause).slice(0, 500)}` })
})

const main = async () => {
  const raw = process.argv[2]
  if (raw === undefined) throw new Error("usage: worker.ts '<config json>'")
  const config = JSON.parse(raw) as WorkerConfig
  const random = prng(config.seed)
  const control = stdinControl()

  const faults: Context.Tag.Service<Faults.Faults> = {
    hit: (point) =>
      random() < config.pauseRate
        ? Effect.zipRight(Effect.sync(() => emit({ type: "at", point })), control.waitForContinue())
        : Effect.void
  }

  // Whether the last reply was made up here (the step loop reports it with the step). The daemon's
  // deliveries run side by side: it reports each reply as it is given (with no generation: a
  // delivery carries none).
  let synthetic = false
  const replied = (delivery: { readonly eventId: string }, reply: DeliveryReply, madeUp: boolean) =>
    Effect.sync(() => {
      synthetic = madeUp
      if (config.daemon !== undefined) emit({ type: "step", eventId: delivery.eventId, reply: reply._tag, synthetic: madeUp })
      return reply
    })
  const transport = Layer.effect(
    Transport,
    Effect.map(Inbox, (inbox) => ({
      deliver: (delivery) => {
        const draw = random()
        if (draw < config.retryRate) return replied(delivery, { _tag: "Retry", reason: SyntheticRetry }, true)
        if (draw < config.retryRate + config.gapRate) {
          return replied(delivery, { _tag: "Gap", expected: Math.max(1, delivery.seq - 1) }, true)
        }
        return inbox.receive(delivery).pipe(
          Effect.mapError((cause) => new DeliveryFailed({ eventId: delivery.eventId, message: `inbox failed: ${cause.message}`, cause })),
          Effect.flatMap((reply) => replied(delivery, reply, false))
        )
      }
    }))
  )

  const live = Relay.layer.pipe(
    Layer.provide(transport),
    Layer.provideMerge(
      Layer.merge(
        Layer.scoped(
          RelayQueue,
          openQueue(config.queue, {
            leaseTicks: config.leaseMs,
            retryBudget: 1_000_000,
            backoffBase: config.backoffBaseMs,
            backoffCap: config.backoffCapMs,
            admission: "seed",
            clock: config.clock
          })
        ),
        SqliteInbox.layer({ filename: config.inboxFile, business: business(), busyTimeoutMillis: config.busyTimeoutMs })
      )
    )
  )

  const daemon = (workers: number) =>
    Effect.gen(function*() {
      const relay = yield* Relay
      const running = yield* Effect.fork(
        relay.run({
          workers,
          batchSize: 1,
          pollInterval: "10 millis",
          deliveryTimeout: Math.floor(config.leaseMs / 2),
          shutdownGrace: "5 seconds",
          metricsInterval: null,
          pruneInterval: null
        }).pipe(Effect.provideService(Faults.Faults, faults), Effect.provide(Logger.replace(Logger.defaultLogger, reportFailures)))
      )
      emit({ type: "ready", pid: process.pid })
      yield* control.waitForStop
      yield* Fiber.interrupt(running)
    })

  const program = config.daemon !== undefined ? daemon(config.daemon) : Effect.gen(function*() {
    const relay = yield* Relay
    emit({ type: "ready", pid: process.pid })
    while (!control.isStopped()) {
      const result = yield* Effect.either(relay.step.pipe(Effect.provideService(Faults.Faults, faults)))
      if (result._tag === "Left") {
        emit({ type: "error", tag: (result.left as { _tag?: string })._tag ?? "unknown", message: describeError(result.left) })
        yield* Effect.sleep("20 millis")
      } else if (result.right._tag === "Idle") {
        yield* Effect.sleep("10 millis")
      } else {
        const step = result.right
        emit({
          type: "step",
          eventId: step.claimed.event.eventId,
          generation: step.claimed.token.generation,
          reply: step.reply._tag,
          synthetic,
          outcome: step.outcome._tag
        })
      }
    }
  })

  await Effect.runPromise(Effect.provide(program, live))
}

runMain(main)
