/**
 * The retry and lease policy. The defaults are the seed's, so the article's numbers reproduce.
 */
import { Duration, Either, Option, ParseResult, Schema } from "effect"
import { DefaultMaxBodyBytes } from "./Json.js"

const positiveInt = Schema.Int.pipe(Schema.positive())

/** How long a claim holds a head, how often a head is retried, and how the retries back off. */
export const RelayPolicy = Schema.Struct({
  /** Ticks a claim stays valid. */
  leaseTicks: positiveInt,
  /** Claims per round before a transient failure quarantines the head. */
  retryBudget: positiveInt,
  /** First backoff delay, doubled on each failure of the round. */
  backoffBase: Schema.Int.pipe(Schema.nonNegative()),
  /** Largest backoff delay. */
  backoffCap: Schema.Int.pipe(Schema.nonNegative()),
  /** Largest canonical body accepted by enqueue, in bytes. */
  maxBodyBytes: positiveInt,
  /**
   * Where a flow enters the rotation when it gets its first event (or its first after being
   * drained): "seed" at `served = 0`, ahead of everyone (the article's behaviour, which lets a
   * stream of new flows overtake an old one forever); "tail" behind every flow already in the
   * rotation (it takes the next ticket as its `served`), which bounds every flow's wait.
   */
  admission: Schema.Literal("seed", "tail"),
  /**
   * Spread of retry delays: "none" is the deterministic schedule above (the seed's); "full" draws
   * each delay uniformly from [0, schedule) with Effect's `Random` (seedable), so that flows that
   * failed together do not retry together.
   */
  jitter: Schema.Literal("none", "full"),
  /**
   * What a write does when the clock reads earlier than the persisted tick: "strict" refuses with
   * `ClockRegressed` (the seed's, for logical time); "clamp" uses the persisted tick instead and
   * counts it in a metric — for processes on several machines whose clocks differ slightly.
   */
  clock: Schema.Literal("strict", "clamp")
})
/** @see RelayPolicy */
export type RelayPolicy = typeof RelayPolicy.Type

/** The seed policy: lease 5, budget 3, base 2, cap 8, bodies up to 1 MiB, seed admission. */
export const defaultPolicy: RelayPolicy = {
  leaseTicks: 5,
  retryBudget: 3,
  backoffBase: 2,
  backoffCap: 8,
  maxBodyBytes: DefaultMaxBodyBytes,
  admission: "seed",
  jitter: "none",
  clock: "strict"
}

/**
 * A policy as a user writes it. Times may be numbers (ticks: milliseconds with Effect's default
 * clock) or Durations ("30 seconds"), which are converted to milliseconds.
 */
export type PolicyInput = Partial<Omit<RelayPolicy, "leaseTicks" | "backoffBase" | "backoffCap">> & {
  readonly leaseTicks?: Duration.DurationInput | undefined
  readonly backoffBase?: Duration.DurationInput | undefined
  readonly backoffCap?: Duration.DurationInput | undefined
}

const ticks = (value: Duration.DurationInput | undefined, fallback: number): unknown => {
  if (value === undefined) return fallback
  if (typeof value === "number") return value
  const decoded = Duration.decodeUnknown(value)
  return Option.isSome(decoded) && Duration.isFinite(decoded.value) ? Duration.toMillis(decoded.value) : value
}

/** Fills in the defaults and validates a partial policy given by a user. */
export const makePolicy = (overrides: PolicyInput | undefined): Either.Either<RelayPolicy, string> =>
  Schema.decodeUnknownEither(RelayPolicy)({
    ...defaultPolicy,
    ...overrides,
    leaseTicks: ticks(overrides?.leaseTicks, defaultPolicy.leaseTicks),
    backoffBase: ticks(overrides?.backoffBase, defaultPolicy.backoffBase),
    backoffCap: ticks(overrides?.backoffCap, defaultPolicy.backoffCap)
  }).pipe(Either.mapLeft((error) => ParseResult.TreeFormatter.formatErrorSync(error)))

/** Delay before the next try after the `attempts`-th claim of a round failed: min(cap, base·2^(attempts−1)). */
export const backoff = (policy: RelayPolicy, attempts: number): number =>
  // Past 2^52 every delay is capped anyway; clamping the exponent keeps 0·2^k from becoming 0·∞ = NaN.
  Math.min(policy.backoffCap, policy.backoffBase * 2 ** Math.min(52, Math.max(0, attempts - 1)))

/**
 * The delay actually used: the schedule, or with full jitter a uniform draw from [0, schedule)
 * given `draw` in [0, 1).
 */
export const retryDelay = (policy: RelayPolicy, attempts: number, draw: number): number => {
  const delay = backoff(policy, attempts)
  return policy.jitter === "full" ? Math.floor(delay * Math.min(Math.max(draw, 0), 1)) : delay
}
