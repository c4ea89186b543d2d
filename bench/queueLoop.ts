/**
 * One queue operation in a loop on a SQLite store, no worker, no inbox, no wait: what each step
 * allocates, or with `--promoted` what of it outlives the young generation's collections, and
 * where (a diagnosis of the collector's work, not part of a bench run):
 *
 *   npx tsx bench/queueLoop.ts [steps] [--op claim-settle|enqueue|stats] [--promoted]
 *   node --import tsx --import ./bench/dist.mjs bench/queueLoop.ts …   # the compiled library (npm run build): sites by line
 *
 * The store holds 20,100 events in 64 flows before the loop (enough for 20,000 claims), and the
 * loop runs 100 steps before it counts.
 */
import { Effect } from "effect"
import * as SqliteRelayQueue from "../src/layers/SqliteRelayQueue.js"
import { allocationLines, startAllocationProfile } from "./cpuProfile.js"
import { freshWorkFile, removeDb } from "./stores.js"

const args = process.argv.slice(2)
const opAt = args.indexOf("--op")
const chosen = opAt < 0 ? "claim-settle" : args[opAt + 1] ?? ""
const steps = Number(args.find((arg, i) => /^\d+$/.test(arg) && (opAt < 0 || i !== opAt + 1)) ?? 5000)
const operations = ["claim-settle", "enqueue", "stats"]
if (!operations.includes(chosen)) throw new Error(`--op must be one of ${operations.join(", ")}, got ${chosen}`)
if (steps > 20_000 && chosen === "claim-settle") throw new Error("at most 20,000 claim-settle steps (the store's events)")

const file = freshWorkFile("queue-loop.db")
await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  const queue = yield* SqliteRelayQueue.make({ filename: file })
  const events = Array.from({ length: 20_100 }, (_, i) => ({ eventId: `e${i}`, flowId: `f${i % 64}`, body: { n: i } }))
  for (let i = 0; i < events.length; i += 1000) yield* queue.enqueueBatch(events.slice(i, i + 1000))
  let enqueued = 0
  const step = chosen === "enqueue"
    ? Effect.suspend(() => Effect.asVoid(queue.enqueue({ eventId: `x${enqueued}`, flowId: `g${enqueued++ % 64}`, body: { enqueued } })))
    : chosen === "stats"
    ? Effect.asVoid(queue.stats)
    : Effect.flatMap(queue.claim, (outcome) =>
      outcome._tag === "Claimed" ? Effect.asVoid(queue.settle(outcome.token, { _tag: "Accepted" })) : Effect.dieMessage(`claim: ${outcome._tag}`))
  yield* Effect.repeatN(step, 99)
  const profile = yield* Effect.promise(() => startAllocationProfile({ promoted: args.includes("--promoted") }))
  yield* Effect.repeatN(step, steps - 1)
  const counted = yield* Effect.promise(() => profile.stop(steps, 10))
  console.log(`${chosen}:`)
  for (const line of allocationLines(counted, "step")) console.log(line)
})))
removeDb(file)
