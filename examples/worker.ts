/**
 * The worker: claims the head of each flow in the application's database, in fair turns, and
 * POSTs it to the receiver signed with Standard Webhooks; it runs until SIGINT or SIGTERM, then
 * lets the deliveries in flight finish.
 *
 *   APP_DB=app.db RECEIVER_URL=http://127.0.0.1:8080/ WEBHOOK_SECRET=whsec_… \
 *     node --import tsx examples/worker.ts
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { Config, Effect, Layer } from "effect"
import { HttpTransport, Relay, SqliteRelayQueue } from "../src/index.js" // in your app: from "fair-relay"

const program = Effect.gen(function*() {
  const relay = yield* Relay
  yield* Effect.log("worker started")
  yield* relay.run({ workers: 4, pollInterval: "200 millis" })
})

const Queue = SqliteRelayQueue.layerClient().pipe(
  Layer.provide(SqliteClient.layer({ filename: process.env.APP_DB ?? "app.db" }))
)

const Http = HttpTransport.layerConfig({
  url: Config.string("RECEIVER_URL"),
  secrets: HttpTransport.configSecrets("WEBHOOK_SECRET")
}).pipe(Layer.provide(NodeHttpClient.layerUndici))

const Live = Relay.layer.pipe(Layer.provide(Http), Layer.provideMerge(Queue))

program.pipe(Effect.provide(Live), NodeRuntime.runMain)
