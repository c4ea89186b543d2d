/**
 * Every metric of the relay, defined in one place (and the options of its hot-path spans). Export them with any Effect metrics exporter
 * (e.g. `@effect/opentelemetry`); names follow the OpenTelemetry conventions.
 */
import { Effect, Exit, FiberRef, Metric, MetricBoundaries } from "effect"
import type { Tracer } from "effect"

/** Heads claimed. */
export const claims = Metric.counter("fair_relay_claims_total", { description: "heads claimed", incremental: true })
/** Claims per group (flows of no group are not counted here: they are their own groups). */
export const groupClaims = Metric.counter("fair_relay_group_claims_total", { description: "heads claimed, by group", incremental: true })

/** Counts one claim per entry of `groups` (the group of each claimed flow that has one), through `update`. */
export const countGroupClaims = (update: Update, groups: ReadonlyArray<string>): void => {
  const counts = new Map<string, number>()
  for (const group of groups) counts.set(group, (counts.get(group) ?? 0) + 1)
  for (const [group, n] of counts) update(Metric.tagged(groupClaims, "group", group), n)
}

/** Heads quarantined, by group (flows of no group are not counted here; `settles` counts every quarantine). */
export const groupQuarantines = Metric.counter("fair_relay_group_quarantines_total", {
  description: "heads quarantined, by group",
  incremental: true
})

/** Claims that found nothing eligible. */
export const idleClaims = Metric.counter("fair_relay_idle_claims_total", { description: "claims that found nothing eligible", incremental: true })
/** Claims that found eligible heads all held by other writers (parallel claims) and tried again. */
export const contendedClaims = Metric.counter("fair_relay_contended_claims_total", {
  description: "claims that found eligible heads, all held by other writers (parallel claims), and tried again",
  incremental: true
})
/** Settle outcomes, tagged `outcome` = Acked | RetryScheduled | Quarantined | Stale | Expired. */
export const settles = Metric.counter("fair_relay_settles_total", { description: "settle outcomes by kind", incremental: true })
/** `settles` tagged with each outcome, made once: tagging makes a new metric key every time. */
export const settlesByOutcome = {
  Acked: Metric.tagged(settles, "outcome", "Acked"),
  RetryScheduled: Metric.tagged(settles, "outcome", "RetryScheduled"),
  Quarantined: Metric.tagged(settles, "outcome", "Quarantined"),
  Stale: Metric.tagged(settles, "outcome", "Stale"),
  Expired: Metric.tagged(settles, "outcome", "Expired")
} as const
/** Events enqueued (new ones, not `Existing`). */
export const enqueued = Metric.counter("fair_relay_enqueued_total", { description: "new events enqueued", incremental: true })
/** Redrives. */
export const redrives = Metric.counter("fair_relay_redrives_total", { description: "quarantined heads redriven", incremental: true })
/** Paused flows and groups, tagged `kind` (`flow` or `group`): claims pass over their heads. */
export const paused = Metric.gauge("fair_relay_paused", { description: "paused flows and groups" })
/** Quarantined heads an operator discarded. */
export const discards = Metric.counter("fair_relay_discards_total", { description: "quarantined heads discarded", incremental: true })
/** Writes whose clock read below the persisted tick and was clamped (clock: "clamp"). */
export const clockClamped = Metric.counter("fair_relay_clock_clamped_total", {
  description: "writes whose clock was behind the persisted tick",
  incremental: true
})
/** Deliveries that got no usable reply (timeout, transport failure) and were settled as Retry. */
export const deliveryFailures = Metric.counter("fair_relay_delivery_failures_total", {
  description: "deliveries settled as Retry because no reply came",
  incremental: true
})
/** Delivery latency in milliseconds. */
export const deliveryLatency = Metric.histogram(
  "fair_relay_delivery_latency_ms",
  MetricBoundaries.exponential({ start: 1, factor: 2, count: 16 }),
  "time from sending an event to its reply"
)
/** Calls each group commit of the worker daemon gathered into one transaction, tagged `operation`. */
export const groupCommitSize = Metric.histogram(
  "fair_relay_group_commit_size",
  MetricBoundaries.exponential({ start: 1, factor: 2, count: 12 }),
  "calls gathered into one transaction by the worker daemon's group commit"
)
/** `groupCommitSize` tagged with each operation, made once (as `settlesByOutcome`). */
export const groupCommitSizeOf = {
  settle: Metric.tagged(groupCommitSize, "operation", "settle"),
  claim: Metric.tagged(groupCommitSize, "operation", "claim"),
  deliver: Metric.tagged(groupCommitSize, "operation", "deliver")
} as const
/** Events by state, tagged `state`. */
export const depth = Metric.gauge("fair_relay_events", { description: "events by state" })
/** Age in milliseconds of the oldest eligible head (0 when none). */
export const oldestEligibleAge = Metric.gauge("fair_relay_oldest_eligible_age_ms", {
  description: "how long the oldest eligible head has been waiting"
})
/** Rows deleted by retention, tagged `kind` = events | dedup | receipts. */
export const pruned = Metric.counter("fair_relay_pruned_total", { description: "rows deleted by retention", incremental: true })
/** `pruned` tagged with each kind, made once. */
export const prunedByKind = {
  events: Metric.tagged(pruned, "kind", "events"),
  dedup: Metric.tagged(pruned, "kind", "dedup"),
  receipts: Metric.tagged(pruned, "kind", "receipts")
} as const

/** Updates one metric by `input` (what `record` hands its callback). */
export type Update = <In>(metric: Pick<Metric.Metric<unknown, In, unknown>, "unsafeUpdate">, input: In) => void

/**
 * The updates `updates` makes, with the fiber's metric labels (`Effect.tagMetrics`), as
 * `Metric.update` makes them — in one runtime step where `Metric.update` takes several for each:
 * a hot-path operation updates several.
 */
export const record = (updates: (update: Update) => void): Effect.Effect<void> => recordThen(updates, undefined)

/**
 * `record`, then `value`: what `Effect.as(record(updates), value)` answers, in fewer runtime steps
 * (an operation's result passes through, where `Effect.tap` and `Effect.map` would add steps).
 */
export const recordThen = <A>(updates: (update: Update) => void, value: A): Effect.Effect<A> =>
  Effect.withFiberRuntime((fiber) => {
    const labels = fiber.getFiberRef(FiberRef.currentMetricLabels)
    updates((metric, input) => metric.unsafeUpdate(input, labels))
    return Exit.succeed(value)
  })

/** Span options of the hot-path operations: no stack capture (tens of µs each); the span name says where. */
const hotSpan = { captureStackTrace: false } as const

/** Effect's built-in tracer (the default service, where the application installed none): its spans go nowhere unless something reads them. */
export const builtInTracer: Tracer.Tracer = Effect.runSync(Effect.tracer)

/**
 * `Effect.withSpan(name)` for a hot-path operation (claim, settle, receive, a step): the span is
 * made only when a real tracer is installed (`@effect/opentelemetry`, `Layer.setTracer`); under
 * Effect's built-in tracer, which exports nothing, the operation runs without one — a span costs
 * a context copy, a clock read and an object per operation.
 */
export const withHotSpan = (name: string, options?: Tracer.SpanOptions) => {
  const spanOptions = options === undefined ? hotSpan : { ...hotSpan, ...options }
  return <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.tracerWith((tracer) => (tracer === builtInTracer ? self : Effect.withSpan(self, name, spanOptions)))
}

/** `Effect.annotateCurrentSpan` inside a `withHotSpan`: nothing to do when no real tracer made the span. */
export const annotateHotSpan = (attributes: () => Record<string, unknown>): Effect.Effect<void> =>
  Effect.tracerWith((tracer) => (tracer === builtInTracer ? Effect.void : Effect.annotateCurrentSpan(attributes())))
