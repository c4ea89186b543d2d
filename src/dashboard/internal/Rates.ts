/**
 * Claims and acks per minute, as this process sees them: the store keeps no history, so the
 * dashboard samples `stats` at an interval and derives rates from the deltas of `claims` (one per
 * claim; tickets would also count tail admissions) and of `byState.acked` between samples.
 */
import { Clock, Duration, Effect, Ref, Schedule } from "effect"
import type { Scope } from "effect"
import type { QueueStats, RelayQueueService } from "../../services/RelayQueue.js"

/** One reading of the store's counters. */
export interface Sample {
  /** Wall-clock milliseconds of the reading. */
  readonly at: number
  readonly claims: number
  readonly acked: number
  readonly quarantined: number
}

/** Rates over the last minute (or the span sampled so far, when shorter). */
export interface Rates {
  readonly claimsPerMinute: number | undefined
  readonly acksPerMinute: number | undefined
  /** The span the rates cover, in milliseconds (0: not enough samples yet). */
  readonly spanMillis: number
  /** Per interval between consecutive samples, oldest first: claims and acks per minute. */
  readonly series: ReadonlyArray<{ readonly at: number; readonly claims: number; readonly acks: number }>
}

/** The sampler's readings, newest last. */
export interface Sampler {
  readonly samples: Effect.Effect<ReadonlyArray<Sample>>
  /** Records a reading taken elsewhere (a page load), so rates are as fresh as the page. */
  readonly record: (stats: QueueStats) => Effect.Effect<void>
}

/** The reading of `stats` taken at `at`. */
export const toSample = (at: number, stats: QueueStats): Sample => ({
  at,
  claims: stats.claims,
  acked: stats.byState.acked,
  quarantined: stats.byState.quarantined
})

/**
 * Samples `queue.stats` every `interval` for the lifetime of the scope, keeping `keep` readings.
 * A failed reading is logged and skipped: the dashboard must outlive a busy or restarting store.
 */
export const start = (
  queue: RelayQueueService,
  interval: Duration.Duration,
  keep: number
): Effect.Effect<Sampler, never, Scope.Scope> =>
  Effect.gen(function*() {
    const ref = yield* Ref.make<ReadonlyArray<Sample>>([])
    const minGap = Math.max(1, Duration.toMillis(interval) / 2)
    const record = (stats: QueueStats) =>
      Effect.flatMap(Clock.currentTimeMillis, (at) =>
        Ref.update(ref, (samples) => {
          const last = samples[samples.length - 1]
          // Page loads between scheduled readings would crowd the chart: keep readings apart.
          if (last !== undefined && at - last.at < minGap) return samples
          const next = [...samples, toSample(at, stats)]
          return next.length > keep ? next.slice(next.length - keep) : next
        }))
    yield* queue.stats.pipe(
      Effect.flatMap(record),
      Effect.catchAllCause((cause) => Effect.logWarning("Dashboard: sampling stats failed", cause)),
      Effect.repeat(Schedule.spaced(interval)),
      Effect.annotateLogs("service", "Dashboard"),
      Effect.forkScoped
    )
    return { samples: Ref.get(ref), record }
  })

const perMinute = (delta: number, millis: number) => (millis <= 0 ? 0 : (Math.max(0, delta) * 60_000) / millis)

/**
 * Rates from the readings: over the last minute when the readings span one, else over what they
 * span. A counter that went down (the store was replaced, acked events purged) counts as 0.
 */
export const rates = (samples: ReadonlyArray<Sample>): Rates => {
  const series = samples.slice(1).map((sample, i) => {
    const before = samples[i]!
    const span = sample.at - before.at
    return { at: sample.at, claims: perMinute(sample.claims - before.claims, span), acks: perMinute(sample.acked - before.acked, span) }
  })
  const last = samples[samples.length - 1]
  if (last === undefined || samples.length < 2) {
    return { claimsPerMinute: undefined, acksPerMinute: undefined, spanMillis: 0, series }
  }
  // The newest reading at least a minute older than the last one, else the oldest.
  let first = samples[0]!
  for (const sample of samples) {
    if (last.at - sample.at >= 60_000) first = sample
    else break
  }
  const span = last.at - first.at
  return {
    claimsPerMinute: perMinute(last.claims - first.claims, span),
    acksPerMinute: perMinute(last.acked - first.acked, span),
    spanMillis: span,
    series
  }
}
