/**
 * The chaos producer process: `node --import tsx scenarios/chaos/producer.ts '<config json>'`.
 *
 * Enqueues the run's F × E events — each flow's events in seq order, flows interleaved in an
 * order fixed by the seed, in batches of 1..`maxBatch` — and says `done`. When it is killed and
 * restarted it starts over from the first event: everything already stored must come back
 * `Existing` at the same seq, which checks enqueue idempotency across crashes. A failed enqueue
 * (a `SqlError` when PostgreSQL terminated its connection or restarts) is tried again.
 *
 * stdout (JSON lines): `ready`, `progress` (now and then), `violation` (a wrong seq or a
 * conflict), `done`.
 */
import { Effect } from "effect"
import type { EnqueueInput } from "../../src/index.js"
import { describeError, emit, runMain } from "../processes/io.js"
import { deltaOf, eventId, flowId, prng } from "./business.js"
import { openQueue } from "./stores.js"
import type { QueueStore } from "./stores.js"

/** What the parent tells the producer. */
export interface ProducerConfig {
  readonly queue: QueueStore
  readonly flows: number
  readonly events: number
  readonly seed: number
  readonly maxBatch: number
  readonly clock: "strict" | "clamp"
}

/** The run's events in enqueue order: per-flow seq order, flows interleaved by the seed. */
export const enqueueOrder = (config: Pick<ProducerConfig, "flows" | "events" | "seed">) => {
  const random = prng(config.seed ^ 0x5eed)
  const next = Array.from({ length: config.flows }, () => 1)
  const order: Array<{ readonly f: number; readonly seq: number }> = []
  const open = Array.from({ length: config.flows }, (_, f) => f)
  while (open.length > 0) {
    const i = Math.floor(random() * open.length)
    const f = open[i]!
    order.push({ f, seq: next[f]! })
    next[f]! += 1
    if (next[f]! > config.events) open.splice(i, 1)
  }
  return order
}

const main = async () => {
  const raw = process.argv[2]
  if (raw === undefined) throw new Error("usage: producer.ts '<config json>'")
  const config = JSON.parse(raw) as ProducerConfig
  const order = enqueueOrder(config)
  const sizes = prng(config.seed ^ 0xba7c4)
  const program = Effect.gen(function*() {
    const queue = yield* openQueue(config.queue, { clock: config.clock })
    emit({ type: "ready", pid: process.pid })
    let i = 0
    let enqueued = 0
    let existing = 0
    while (i < order.length) {
      const size = Math.min(order.length - i, 1 + Math.floor(sizes() * config.maxBatch))
      const items = order.slice(i, i + size)
      const inputs: Array<EnqueueInput> = items.map(({ f, seq }) => ({
        eventId: eventId(f, seq),
        flowId: flowId(f),
        body: { delta: deltaOf(f, seq) }
      }))
      const results = yield* Effect.either(size === 1 ? Effect.map(queue.enqueue(inputs[0]!), (r) => [r]) : queue.enqueueBatch(inputs))
      if (results._tag === "Left") {
        const tag = (results.left as { _tag?: string })._tag
        if (tag === "EnqueueConflict") emit({ type: "violation", message: describeError(results.left) })
        else emit({ type: "error", tag: tag ?? "unknown", message: describeError(results.left) })
        yield* Effect.sleep("20 millis")
        continue // the same batch again
      }
      results.right.forEach((result, k) => {
        const { f, seq } = items[k]!
        if (result.seq !== seq) {
          emit({ type: "violation", message: `${eventId(f, seq)} got seq ${result.seq} (${result._tag})` })
        }
        if (result._tag === "Enqueued") enqueued++
        else existing++
      })
      i += size
      if (i % 500 < size) emit({ type: "progress", done: i, enqueued, existing })
    }
    emit({ type: "done", enqueued, existing })
  })
  await Effect.runPromise(Effect.scoped(program))
}

runMain(main)
