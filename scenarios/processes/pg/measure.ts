/**
 * Measures claim/settle latency and drain throughput of PgRelayQueue on the database named by
 * FAIR_RELAY_PG_URL:
 *
 *   FAIR_RELAY_PG_URL=postgres://postgres@127.0.0.1:5432/fair_relay_test npx tsx scenarios/processes/pg/measure.ts
 *
 * Each run uses a fresh schema (dropped afterwards) holding `flows × perFlow` events enqueued at
 * tick 0, then drains it at tick 1 (a fixed logical tick, so no ClockRegressed) with W workers,
 * each a PgRelayQueue with its own one-connection pool, all in this process:
 *   single: claim → settle(Accepted) per event;  batch B: claimBatch(B) → settleBatch.
 * It reports events/s over the drain and, for single steps, the latency of each claim and settle
 * as the caller sees it (including waiting for the store's advisory lock), p50/p99.
 */
import { Effect } from "effect"
import * as os from "node:os"
import type { RelayQueueService } from "../../../src/index.js"
import { PgRelayQueue, TickClock } from "../../../src/index.js"
import { runScript, scratchSchema } from "./scratch.js"

const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN
}

interface Run {
  readonly workers: number
  readonly batch: number
  readonly flows: number
  readonly perFlow: number
}

let runs = 0

const measure = (run: Run) =>
  Effect.scoped(Effect.gen(function*() {
    const url = yield* scratchSchema(`measure_${process.pid}_${runs++}`)
    const setup = yield* PgRelayQueue.make({ url, maxConnections: 1 })
    const total = run.flows * run.perFlow
    for (let start = 0; start < total; start += 5_000) {
      const chunk = Array.from({ length: Math.min(5_000, total - start) }, (_, i) => {
        const n = start + i
        return { eventId: `E${n}`, flowId: `F${n % run.flows}`, body: { delta: 1 } }
      })
      yield* setup.enqueueBatch(chunk).pipe(TickClock.at(0))
    }
    const workers: ReadonlyArray<RelayQueueService> = yield* Effect.forEach(
      Array.from({ length: run.workers }),
      () => PgRelayQueue.make({ url, maxConnections: 1 })
    )
    const claimMs: Array<number> = []
    const settleMs: Array<number> = []
    let done = 0
    const timed = <A, E>(into: Array<number>, effect: Effect.Effect<A, E>) =>
      Effect.suspend(() => {
        const t0 = performance.now()
        return Effect.tap(effect, () => Effect.sync(() => into.push(performance.now() - t0)))
      })
    const started = performance.now()
    yield* Effect.forEach(workers, (queue) =>
      Effect.gen(function*() {
        for (;;) {
          if (run.batch <= 1) {
            const claimed = yield* timed(claimMs, queue.claim)
            if (claimed._tag === "Idle") return
            yield* timed(settleMs, queue.settle(claimed.token, { _tag: "Accepted" }))
            done++
          } else {
            const claims = yield* queue.claimBatch(run.batch)
            if (claims.length === 0) return
            yield* queue.settleBatch(claims.map((c) => ({ token: c.token, reply: { _tag: "Accepted" as const } })))
            done += claims.length
          }
        }
      }).pipe(TickClock.at(1)), { concurrency: "unbounded", discard: true })
    const seconds = (performance.now() - started) / 1000
    const snapshot = yield* setup.snapshot
    const acked = snapshot.events.filter((e) => e.state === "acked").length
    if (acked !== total || done !== total) return yield* Effect.dieMessage(`drained ${done}, acked ${acked} of ${total}`)
    const ms = (values: ReadonlyArray<number>) =>
      values.length === 0 ? "-" : `${percentile(values, 50).toFixed(2)}/${percentile(values, 99).toFixed(2)}`
    console.log(
      `workers=${run.workers} ${run.batch <= 1 ? "single" : `batch=${run.batch}`} events=${total} (${run.flows} flows)` +
        `  ${(total / seconds).toFixed(0)} events/s` +
        (run.batch <= 1 ? `  claim p50/p99 ${ms(claimMs)} ms  settle p50/p99 ${ms(settleMs)} ms` : "")
    )
  }))

const plan: ReadonlyArray<Run> = [
  { workers: 1, batch: 1, flows: 100, perFlow: 20 },
  { workers: 2, batch: 1, flows: 100, perFlow: 20 },
  { workers: 4, batch: 1, flows: 100, perFlow: 20 },
  { workers: 8, batch: 1, flows: 100, perFlow: 20 },
  { workers: 1, batch: 64, flows: 200, perFlow: 50 },
  { workers: 4, batch: 64, flows: 200, perFlow: 50 }
]

console.log(`node ${process.version}, ${os.cpus().length} CPUs, load average ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}`)
void runScript(
  Effect.forEach(plan, measure, { discard: true }).pipe(
    Effect.andThen(() => console.log(`load average after: ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}`))
  )
)
