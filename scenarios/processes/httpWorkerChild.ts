/**
 * A worker process for the end-to-end HTTP test: `Relay.run` over a SQLite queue file, delivering
 * with the HTTP transport. Runs until the parent closes stdin, then shuts down gracefully.
 *
 * Arguments: <queueFile> <url> <workers>
 */
import { NodeHttpClient } from "@effect/platform-node"
import { Effect, Fiber, Layer } from "effect"
import * as HttpTransport from "../../src/http/HttpTransport.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { Relay } from "../../src/services/Relay.js"
import { commands, emit, runMain } from "./io.js"
import { e2ePolicy, e2eSecret } from "./httpWorkers.js"

const [queueFile, url, workers] = process.argv.slice(2)
if (queueFile === undefined || url === undefined || workers === undefined) throw new Error("usage: <queueFile> <url> <workers>")

const live = Relay.layer.pipe(
  Layer.provide(HttpTransport.layer({ url, secrets: e2eSecret, timeout: "2 seconds" })),
  Layer.provide(NodeHttpClient.layerUndici),
  Layer.provideMerge(SqliteRelayQueue.layer({ filename: queueFile, policy: e2ePolicy }))
)

runMain(() =>
  Effect.runPromise(
    Effect.gen(function*() {
      const relay = yield* Relay
      const running = yield* Effect.fork(
        relay.run({ workers: Number(workers), pollInterval: "50 millis", deliveryTimeout: "3 seconds", metricsInterval: null })
      )
      emit({ type: "running", pid: process.pid })
      const input = commands()
      yield* Effect.promise(() => input.next())
      yield* Fiber.interrupt(running)
      input.close()
    }).pipe(Effect.provide(live), Effect.scoped)
  ))
