/**
 * The retry and lease policy. The library's defaults are for production on a millisecond clock;
 * `seedPolicy` is the article's logical-tick preset, which the demo and the scenario tests pass.
 */
import { Either, ParseResult, Schema } from "effect"
import type { Duration } from "effect"
import { DefaultMaxBodyBytes } from "./Json.js"
import { checker, Count, MaxTicks, OneOf, record, Ticks } from "./Options.js"

const positiveInt = Schema.Int.pipe(Schema.positive())
/** A lease or delay: bounded so that a deadline (now + it) stays a safe integer. */
const span = (min: number) => Schema.Int.pipe(Schema.between(min, MaxTicks))

/** How long a claim holds a head, how often a head is retried, and how the retries back off. */
export const RelayPolicy = Schema.Struct({
  /** Ticks a claim stays valid (at most `MaxTicks`). */
  leaseTicks: span(1),
  /** Claims per round before a transient failure quarantines the head. */
  retryBudget: positiveInt,
  /** First backoff delay, doubled on each failure of the round (at most `MaxTicks`). */
  backoffBase: span(0),
  /** Largest backoff delay (at most `MaxTicks`). */
  backoffCap: span(0),
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
   * `ClockRegressed` (the seed's, for logical time); "clamp" goes on with its own time — leases,
   * backoffs and eligibility are reckoned from the caller's clock, the persisted tick stays the
   * highest time seen — and counts it in a metric. One process whose clock runs ahead then cannot
   * stall the others, and a small skew between machines changes no delay by more than the skew.
   */
  clock: Schema.Literal("strict", "clamp")
})
/** @see RelayPolicy */
export type RelayPolicy = typeof RelayPolicy.Type

/**
 * The library's defaults, for a millisecond clock: a one-minute lease (longer than the worker's
 * default 30 s delivery timeout), ten tries per round backing off from 1 s to 5 min, tail
 * admission (a bounded wait for every flow), and a clock that tolerates small skews between
 * processes instead of refusing writes.
 */
export const defaultPolicy: RelayPolicy = {
  leaseTicks: 60_000,
  retryBudget: 10,
  backoffBase: 1_000,
  backoffCap: 300_000,
  maxBodyBytes: DefaultMaxBodyBytes,
  admission: "tail",
  jitter: "none",
  clock: "clamp"
}

/**
 * The article's policy on logical ticks: lease 5, budget 3, base 2, cap 8, seed admission, strict
 * clock. The scenarios' numbers reproduce with it; a 5 ms lease is no production setting.
 */
export const seedPolicy: RelayPolicy = {
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
 * The settings that define the protocol a store runs: every process on one store must agree on
 * them, so the store keeps them (set when it is created).
 */
export const ProtocolSettings = Schema.Struct({
  leaseTicks: positiveInt,
  retryBudget: positiveInt,
  backoffBase: Schema.Int.pipe(Schema.nonNegative()),
  backoffCap: Schema.Int.pipe(Schema.nonNegative()),
  admission: Schema.Literal("seed", "tail")
})
/** @see ProtocolSettings */
export type ProtocolSettings = typeof ProtocolSettings.Type

/** Names of the protocol settings, in a fixed order. */
export const protocolKeys = ["leaseTicks", "retryBudget", "backoffBase", "backoffCap", "admission"] as const

/** One protocol setting's name. */
export type ProtocolKey = typeof protocolKeys[number]

/**
 * A retention a store keeps once an operator sets one (`setPolicy`): how long acked events and
 * their dedup records are kept, in ticks (`null` = forever). Stored with the protocol settings so
 * every process prunes by it; pruning early or late never changes an outcome of the protocol.
 */
export const StoredRetention = Schema.Struct({
  acked: Schema.NullOr(Schema.Int.pipe(Schema.nonNegative())),
  dedup: Schema.NullOr(Schema.Int.pipe(Schema.nonNegative()))
})
/** @see StoredRetention */
export type StoredRetention = typeof StoredRetention.Type

/** The protocol settings and an optional retention, as a store's settings row keeps them. */
export const StoredSettings = Schema.Struct({ ...ProtocolSettings.fields, retention: Schema.optional(StoredRetention) })

/** Names of the retention settings a live store changes, as a policy change reports them. */
export const retentionKeys = ["retention.acked", "retention.dedup"] as const

/** One setting a policy change names: a protocol setting or a retention window. */
export type PolicyKey = ProtocolKey | typeof retentionKeys[number]

/** The protocol settings of a policy. */
export const protocolOf = (policy: RelayPolicy): ProtocolSettings => ({
  leaseTicks: policy.leaseTicks,
  retryBudget: policy.retryBudget,
  backoffBase: policy.backoffBase,
  backoffCap: policy.backoffCap,
  admission: policy.admission
})

/**
 * A policy as a user writes it. Times may be numbers (ticks: milliseconds with Effect's default
 * clock) or Durations ("30 seconds"), which are converted to milliseconds.
 */
export type PolicyInput = Partial<Omit<RelayPolicy, "leaseTicks" | "backoffBase" | "backoffCap">> & {
  readonly leaseTicks?: Duration.DurationInput | undefined
  readonly backoffBase?: Duration.DurationInput | undefined
  readonly backoffCap?: Duration.DurationInput | undefined
}

/** The policy option as a caller may write it, checked strictly (unknown keys and wrong kinds refused). */
const PolicyOptions = record("policy", {
  leaseTicks: Schema.optional(Ticks(1)),
  retryBudget: Schema.optional(Count(1)),
  backoffBase: Schema.optional(Ticks(0)),
  backoffCap: Schema.optional(Ticks(0)),
  maxBodyBytes: Schema.optional(Count(1)),
  admission: Schema.optional(OneOf("seed", "tail")),
  jitter: Schema.optional(OneOf("none", "full")),
  clock: Schema.optional(OneOf("strict", "clamp"))
})

const checkPolicy = checker(PolicyOptions, "policy")

/** `A` without the settings it leaves undefined. */
type Given<A> = { [K in keyof A]?: A[K] & ({} | null) }

const given = <A extends object>(record: A): Given<A> => {
  const out: Given<A> = {}
  for (const key in record) {
    if (!Object.hasOwn(record, key)) continue
    const value = record[key]
    if (value !== undefined) out[key] = value
  }
  return out
}

/**
 * Checks a partial policy as a user writes it (unknown settings and values of the wrong kind
 * refused, as `makePolicy` does): the settings it gives, decoded.
 */
export const decodePolicyInput = (input: unknown): Either.Either<PolicyInput, string> => Either.map(checkPolicy(input), given)

/**
 * Fills in `base` (the defaults unless given) and validates a partial policy given by a user: a
 * policy that is not an object, an unknown setting or a value of the wrong kind is refused (the
 * message names it), never replaced by a default.
 */
export const makePolicy = (overrides: PolicyInput | undefined, base: RelayPolicy = defaultPolicy): Either.Either<RelayPolicy, string> =>
  Either.flatMap(overrides === undefined ? Either.right({}) : checkPolicy(overrides), (decoded) =>
    Schema.decodeUnknownEither(RelayPolicy)({ ...base, ...given(decoded) }).pipe(
      Either.mapLeft((error) => ParseResult.TreeFormatter.formatErrorSync(error))
    ))

/**
 * The policy a process runs on a store that keeps `stored` protocol settings: the stored settings
 * plus the caller's per-process options. A protocol setting the caller gives explicitly must
 * equal the stored one; the names of those that differ are returned instead.
 */
export const adoptStored = (
  stored: ProtocolSettings,
  requested: RelayPolicy,
  overrides: PolicyInput | undefined
): Either.Either<RelayPolicy, ReadonlyArray<ProtocolKey>> => {
  const given = new Set(Object.entries(overrides ?? {}).flatMap(([key, value]) => (value === undefined ? [] : [key])))
  const differing = protocolKeys.filter((key) => given.has(key) && requested[key] !== stored[key])
  return differing.length > 0 ? Either.left(differing) : Either.right({ ...requested, ...stored })
}

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

/**
 * The delay before the next try when the receiver asked for at least `least` ticks: the larger of
 * the schedule (`retryDelay`) and `least`, capped by `backoffCap` so that no receiver can park a
 * flow beyond the policy's longest backoff. Without `least` it is `retryDelay`.
 */
export const retryDelayAtLeast = (policy: RelayPolicy, attempts: number, draw: number, least: number | undefined): number => {
  const delay = retryDelay(policy, attempts, draw)
  return least === undefined ? delay : Math.min(policy.backoffCap, Math.max(delay, least))
}
