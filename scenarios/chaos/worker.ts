/**
 * A chaos worker process: `node --import tsx scenarios/chaos/worker.ts '<config json>'`.
 *
 * Runs the real worker (`Relay.step`: claim → deliver → settle) in a loop against the run's queue
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
 * whether the reply was synthetic), `error` (a step that failed; the loop goes on — on PostgreSQL
 * a terminated connection or a restarting server fails the step with a `SqlError`, the pool opens a
 * new connection for the next one, so the worker keeps running).
 * stdin: `{cmd: "continue"}` after an `at`; `{cmd: "stop"}` or end of input: finish the current
 * step and exit 0.
 */
import { Context, Effect, Layer } from "effect"
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
}

/** The reason a synthetic `Retry` carries. */
export const SyntheticRetry = "chaos: receiver unavailable"

const stdinControl = () => {
  let stopped = false
  let pending: (() => void) | undefined
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
        const resume = pending
        pending = undefined
        resume?.()
      } else if (command.cmd === "stop") {
        stopped = true
      }
    }
  })
  process.stdin.on("end", () => {
    stopped = true
    const resume = pending
    pending = undefined
    resume?.()
  })
  return {
    isStopped: () => stopped,
    /** Waits for the parent's "continue" (or the end of stdin). */
    waitForContinue: () =>
      Effect.async<void>((resume) => {
        if (stopped) return resume(Effect.void)
        pending = () => resume(Effect.void)
      })
  }
}

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

  let synthetic = false
  const transport = Layer.effect(
    Transport,
    Effect.map(Inbox, (inbox) => ({
      deliver: (delivery) => {
        const draw = random()
        if (draw < config.retryRate) {
          synthetic = true
          return Effect.succeed<DeliveryReply>({ _tag: "Retry", reason: SyntheticRetry })
        }
        if (draw < config.retryRate + config.gapRate) {
          synthetic = true
          return Effect.succeed<DeliveryReply>({ _tag: "Gap", expected: Math.max(1, delivery.seq - 1) })
        }
        synthetic = false
        return Effect.mapError(inbox.receive(delivery), (cause) =>
          new DeliveryFailed({ eventId: delivery.eventId, message: `inbox failed: ${cause.message}`, cause }))
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

  const program = Effect.gen(function*() {
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
