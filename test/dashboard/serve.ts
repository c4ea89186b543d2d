/**
 * Serves the dashboard over a store for a look by hand, screenshots and the first-paint figure:
 *
 *   npx tsx test/dashboard/serve.ts [--flows N] [--port P] [--allow-redrive]
 *
 * Without --flows it serves the fixture store (every state); with --flows N a store of N flows
 * (one event each, made with enqueueBatch) plus the fixture. Prints the URL; Ctrl-C stops it.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Console, Effect, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Dashboard from "../../src/dashboard/Dashboard.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import { fill, policy } from "./fixture.js"

const arg = (name: string) => {
  const i = process.argv.indexOf(name)
  return i === -1 ? undefined : process.argv[i + 1]
}
const flows = Number(arg("--flows") ?? 0)
const port = Number(arg("--port") ?? 8089)
const token = process.argv.includes("--allow-redrive") ? "operator-token-for-screenshots" : undefined
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "fair-relay-dashboard-"))
const filename = path.join(dir, "queue.db")

const bulk = Effect.gen(function*() {
  const queue = yield* RelayQueue
  const started = Date.now()
  for (let i = 0; i < flows; i += 10_000) {
    const batch = Array.from({ length: Math.min(10_000, flows - i) }, (_, j) => ({
      eventId: `bulk-${String(i + j).padStart(6, "0")}`,
      flowId: `tenant-${String(i + j).padStart(6, "0")}`,
      body: { delta: 1 }
    }))
    yield* queue.enqueueBatch(batch)
  }
  if (flows > 0) yield* Console.log(`enqueued ${flows} flows in ${Date.now() - started} ms`)
})

const QueueLive = SqliteRelayQueue.layer({ filename, policy })

Effect.gen(function*() {
  yield* fill
  yield* bulk
  yield* Layer.launch(
    Layer.effectDiscard(Effect.flatMap(Dashboard.url, (url) => Console.log(`dashboard at ${url}/ (store ${filename})`))).pipe(
      Layer.provideMerge(Dashboard.layerServer({ port, redriveToken: token, title: "fixture" }))
    )
  )
}).pipe(
  Effect.provide(QueueLive),
  Effect.ensuring(Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))),
  NodeRuntime.runMain
)
