/**
 * Exporting the relay's spans and metrics with OpenTelemetry. Run: `npx tsx examples/opentelemetry.ts`
 * (console exporters here; use an OTLP exporter in production).
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { ConsoleMetricExporter, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics"
import { BatchSpanProcessor, ConsoleSpanExporter } from "@opentelemetry/sdk-trace-base"
import { Effect, Layer, Ref } from "effect"
import { Counter, Relay, RelayQueue, SqliteInbox, SqliteRelayQueue, Transport } from "../src/index.js"

const Telemetry = NodeSdk.layer(() => ({
  resource: { serviceName: "orders-relay" },
  spanProcessor: new BatchSpanProcessor(new ConsoleSpanExporter()),
  metricReader: new PeriodicExportingMetricReader({ exporter: new ConsoleMetricExporter(), exportIntervalMillis: 5_000 })
}))

const Receiver = Layer.unwrapEffect(Effect.map(Ref.make(1000), (maxDelta) =>
  SqliteInbox.layer({ filename: ":memory:", business: Counter.business(maxDelta) })))

const Live = Relay.layer.pipe(
  Layer.provide(Transport.layerInbox),
  Layer.provide(Receiver),
  Layer.provideMerge(SqliteRelayQueue.layer({ filename: ":memory:", policy: { leaseTicks: "30 seconds" } }))
)

const program = Effect.gen(function*() {
  const queue = yield* RelayQueue
  for (let i = 1; i <= 3; i++) yield* queue.enqueue({ eventId: `order-1:${i}`, flowId: "order-1", body: { delta: i } })
  const relay = yield* Relay
  for (let i = 0; i < 3; i++) yield* relay.step
})

Effect.runPromise(program.pipe(Effect.provide(Live), Effect.provide(Telemetry)))
