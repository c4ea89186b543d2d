/**
 * The retry and lease policy. The defaults are the seed's, so the article's numbers reproduce.
 */
import { Either, ParseResult, Schema } from "effect"
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
  admission: Schema.Literal("seed", "tail")
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
  admission: "seed"
}

/** Fills in the defaults and validates a partial policy given by a user. */
export const makePolicy = (overrides: Partial<RelayPolicy> | undefined): Either.Either<RelayPolicy, string> =>
  Schema.decodeUnknownEither(RelayPolicy)({ ...defaultPolicy, ...overrides }).pipe(
    Either.mapLeft((error) => ParseResult.TreeFormatter.formatErrorSync(error))
  )

/** Delay before the next try after the `attempts`-th claim of a round failed: min(cap, base·2^(attempts−1)). */
export const backoff = (policy: RelayPolicy, attempts: number): number =>
  // Past 2^52 every delay is capped anyway; clamping the exponent keeps 0·2^k from becoming 0·∞ = NaN.
  Math.min(policy.backoffCap, policy.backoffBase * 2 ** Math.min(52, Math.max(0, attempts - 1)))
