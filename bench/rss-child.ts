/**
 * Child process of the RSS measurement (see `rss.ts`): drains a queue store with
 * `Relay.stepBatch(n)` into a fresh inbox for a time budget, sampling its own RSS, and sends the
 * figures to its parent. A process of its own, so its peak RSS is the drain's alone.
 *
 *   argv: <queue file> <inbox file> <max seconds> <batch size> <entry>
 *
 * The drain needs `fair-relay/sqlite` alone; with entry `fair-relay` the child also loads the
 * main entry (PostgreSQL's driver, HTTP, the dashboard), as an application importing it does.
 */
import { Effect } from "effect"
import { TickClock } from "../src/sqlite.js"
import { drainLoop, relayLayer } from "./drain.js"

const [queueFile, inboxFile, maxSeconds, batchSize, entry] = process.argv.slice(2)
if (queueFile === undefined || inboxFile === undefined || process.send === undefined) {
  console.error("rss-child: run by bench/rss.ts")
  process.exit(2)
}
if (entry === "fair-relay") await import("../src/index.js")

const mb = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10
const baselineRssMB = mb(process.memoryUsage().rss)
const samples: Array<{ readonly seconds: number; readonly drained: number; readonly rssMB: number; readonly heapUsedMB: number }> = []
const started = performance.now()
let nextSample = 0
const sample = (drained: number) => {
  const seconds = (performance.now() - started) / 1000
  if (seconds < nextSample) return
  nextSample = Math.floor(seconds) + 1
  const memory = process.memoryUsage()
  samples.push({ seconds: Math.round(seconds * 10) / 10, drained, rssMB: mb(memory.rss), heapUsedMB: mb(memory.heapUsed) })
}

sample(0)
const loop = await Effect.runPromise(
  drainLoop(Number(batchSize), Number(maxSeconds), true, sample).pipe(
    Effect.provide(relayLayer(queueFile, inboxFile)),
    TickClock.at(0)
  )
)
nextSample = 0
sample(loop.drained)
process.send({
  ...loop,
  baselineRssMB,
  // maxRSS is in kilobytes: the peak of this whole process.
  peakRssMB: Math.round((process.resourceUsage().maxRSS / 1024) * 10) / 10,
  samples
}, () => process.exit(0))
