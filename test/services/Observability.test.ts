/**
 * Observability: spans at each operation carry the event id, flow and generation; metrics count
 * enqueues, claims (idle ones, and by group) and settle outcomes, under the caller's metric
 * labels. Spans are exported through OpenTelemetry to an in-memory exporter.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Metric, Ref } from "effect"
import * as SqliteInbox from "../../src/layers/SqliteInbox.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import * as Counter from "../../src/sample/Counter.js"
import * as Metrics from "../../src/services/Metrics.js"
import { Relay } from "../../src/services/Relay.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import { Transport } from "../../src/services/Transport.js"

describe("observability", () => {
  it.live("a worker step exports spans with event attributes and counts its outcomes", () =>
    Effect.gen(function*() {
      const exporter = new InMemorySpanExporter()
      const telemetry = NodeSdk.layer(() => ({ resource: { serviceName: "test" }, spanProcessor: new SimpleSpanProcessor(exporter) }))
      const receiver = Layer.unwrapEffect(Effect.map(Ref.make(1000), (maxDelta) =>
        SqliteInbox.layer({ filename: ":memory:", business: Counter.business(maxDelta) })))
      const live = Relay.layer.pipe(
        Layer.provide(Transport.layerInbox),
        Layer.provide(receiver),
        Layer.provideMerge(SqliteRelayQueue.layer({ filename: ":memory:", policy: { leaseTicks: "1 minute" } }))
      )
      const acked = Metric.tagged(Metrics.settles, "outcome", "Acked")
      const before = { claims: (yield* Metric.value(Metrics.claims)).count, acked: (yield* Metric.value(acked)).count }
      // The exporter forgets its spans when the SDK shuts down: read them while it runs.
      const spans = yield* Effect.gen(function*() {
        yield* (yield* RelayQueue).enqueue({ eventId: "order-7:paid", flowId: "order-7", body: { delta: 1 } })
        const result = yield* (yield* Relay).step
        expect(result).toMatchObject({ _tag: "Delivered", outcome: { _tag: "Acked" } })
        return [...exporter.getFinishedSpans()]
      }).pipe(Effect.provide(live), Effect.provide(telemetry), Effect.scoped)

      const named = (name: string) => spans.find((s) => s.name === name)
      expect(named("RelayQueue.claim")?.attributes).toMatchObject({ eventId: "order-7:paid", flowId: "order-7", generation: 1 })
      expect(named("RelayQueue.settle")?.attributes).toMatchObject({ eventId: "order-7:paid", generation: 1 })
      expect(named("RelayQueue.enqueue")).toBeDefined()
      expect(named("Inbox.receive")).toBeDefined()
      // The business step's statement, run through the client, keeps its own span.
      expect(spans.some((s) => s.name === "sql.execute" && String(s.attributes["db.query.text"]).startsWith("INSERT INTO counter_total"))).toBe(true)
      const step = named("Relay.step")!
      expect(named("RelayQueue.claim")!.parentSpanContext?.spanId).toBe(step.spanContext().spanId)
      expect((yield* Metric.value(Metrics.claims)).count).toBe(before.claims + 1)
      expect((yield* Metric.value(acked)).count).toBe(before.acked + 1)
    }))

  it.effect("the queue's counters: enqueues, claims by group, idle claims, settle outcomes — under the caller's metric labels", () =>
    Effect.gen(function*() {
      // A label of this test's own: the counters read here count this test's operations alone.
      const count = (metric: Metric.Metric.Counter<number>) =>
        Effect.map(Metric.value(Metric.tagged(metric, "test", "observability-labels")), ({ count }) => count)
      const queue = yield* RelayQueue
      yield* Effect.gen(function*() {
        yield* queue.enqueueBatch([
          { eventId: "a1", flowId: "a", group: "tenant-1", body: {} },
          { eventId: "b1", flowId: "b", group: "tenant-1", body: {} },
          { eventId: "c1", flowId: "c", body: {} }
        ])
        const claims = yield* queue.claimBatch(3)
        expect(claims).toHaveLength(3)
        expect((yield* queue.claim)._tag).toBe("Idle")
        yield* queue.settleBatch(claims.map((claimed) => ({ token: claimed.token, reply: { _tag: "Accepted" } as const })))
      }).pipe(Effect.tagMetrics("test", "observability-labels"))
      expect(yield* count(Metrics.enqueued)).toBe(3)
      expect(yield* count(Metrics.claims)).toBe(3)
      expect(yield* count(Metric.tagged(Metrics.groupClaims, "group", "tenant-1"))).toBe(2)
      expect(yield* count(Metrics.idleClaims)).toBe(1)
      expect(yield* count(Metrics.settlesByOutcome.Acked)).toBe(3)
    }).pipe(Effect.provide(SqliteRelayQueue.layer({ filename: ":memory:", policy: { leaseTicks: "1 minute" } }))))
})
