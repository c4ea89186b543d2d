/**
 * What groups (tenants) cost a SQLite store's steps: `steps` events claimed and settled on a file
 * store (synchronous NORMAL: the statements' cost, not the disk's) of `flows` flows with two
 * events each, in `groups` groups (flow k in group k mod groups; 0: no groups) — one `claim` →
 * `settle` pair at a time, or with `batch` > 1 `claimBatch(batch)` → `settleBatch` — after 500
 * events of warm-up; prints events per second and this process's CPU per event. For diagnosis
 * and before / after comparisons; not part of `npm run bench`:
 *
 *   npx tsx bench/groups.ts [groups] [flows] [steps] [batch]     (defaults: 40 8000 4000 1)
 */
import { Effect } from "effect"
import { SqliteRelayQueue } from "../src/index.js"
import { freshWorkFile, removeDb } from "./stores.js"

const [groups, flows, steps, batch] = [process.argv[2] ?? 40, process.argv[3] ?? 8000, process.argv[4] ?? 4000, process.argv[5] ?? 1]
  .map(Number) as [number, number, number, number]
const file = freshWorkFile("groups.queue.db")

const program = Effect.gen(function*() {
  const queue = yield* SqliteRelayQueue.make({ filename: file, synchronous: "normal", policy: { leaseTicks: 60_000 } })
  const events = Array.from({ length: 2 * flows }, (_, i) => ({
    eventId: `e${i}`,
    flowId: `f${i % flows}`,
    body: {},
    ...(groups === 0 ? {} : { group: `g${i % flows % groups}` })
  }))
  for (let i = 0; i < events.length; i += 1_000) yield* queue.enqueueBatch(events.slice(i, i + 1_000))
  const pairs = (n: number) =>
    Effect.gen(function*() {
      for (let done = 0; done < n; done += batch) {
        if (batch === 1) {
          const claimed = yield* queue.claim
          if (claimed._tag !== "Claimed") return yield* Effect.dieMessage("nothing to claim: fewer steps, or more flows")
          yield* queue.settle(claimed.token, { _tag: "Accepted" })
          continue
        }
        const claimed = yield* queue.claimBatch(batch)
        if (claimed.length < batch) return yield* Effect.dieMessage("nothing to claim: fewer steps, or more flows")
        yield* queue.settleBatch(claimed.map(({ token }) => ({ token, reply: { _tag: "Accepted" as const } })))
      }
    })
  yield* pairs(500)
  const [start, cpu] = [performance.now(), process.cpuUsage()]
  yield* pairs(steps)
  const [seconds, used] = [(performance.now() - start) / 1_000, process.cpuUsage(cpu)]
  console.log(
    `${groups} groups, ${flows} flows, batches of ${batch}: ${(steps / seconds).toFixed(0)} events claimed and settled/s, ` +
      `CPU ${((used.user + used.system) / steps).toFixed(0)} µs per event`
  )
})

Effect.runPromise(Effect.scoped(program)).finally(() => removeDb(file))
