/**
 * The expected alternatives of each operation, as plain tagged records. Callers branch on them
 * with `Match.tagsExhaustive`, so a new case breaks their build instead of their runtime.
 */
import { Schema } from "effect"
import { EventRecord, Token } from "./Records.js"
import { Generation, Seq, Tick } from "./Ids.js"

/** A new event was stored at `seq` of its flow. */
export const Enqueued = Schema.TaggedStruct("Enqueued", { seq: Seq })
/** The same event (id, flow and body) was already stored: nothing changed. */
export const Existing = Schema.TaggedStruct("Existing", { seq: Seq })
/** Result of `enqueue`. */
export const EnqueueResult = Schema.Union(Enqueued, Existing)
/** @see EnqueueResult */
export type EnqueueResult = typeof EnqueueResult.Type

/**
 * A head was claimed: deliver `event`, then settle with `token` before `leaseUntil`. `previousSeq`,
 * present only when an operator discarded the events just before it, is what its delivery carries
 * (`Delivery.previousSeq`).
 */
export const Claimed = Schema.TaggedStruct("Claimed", {
  token: Token,
  event: EventRecord,
  leaseUntil: Tick,
  previousSeq: Schema.optional(Schema.Int.pipe(Schema.nonNegative()))
})
/**
 * No head is eligible now. `wakeAt`, when present, is the earliest tick at which a head becomes
 * eligible (a backoff ends or a lease expires); absent when only an enqueue or a redrive can
 * make work.
 */
export const Idle = Schema.TaggedStruct("Idle", { wakeAt: Schema.optional(Tick) })
/** Result of `claim`. */
export const ClaimOutcome = Schema.Union(Claimed, Idle)
/** @see ClaimOutcome */
export type ClaimOutcome = typeof ClaimOutcome.Type

/** The receiver applied the event: receipt and effect committed together. */
export const Accepted = Schema.TaggedStruct("Accepted", {})
/** The receiver already holds a receipt for this very event. */
export const Duplicate = Schema.TaggedStruct("Duplicate", {})
/** The receiver holds a receipt for this id with another flow, seq or body. */
export const IdConflict = Schema.TaggedStruct("IdConflict", {})
/** The receiver already applied this seq of the flow under another id. */
export const SequenceConflict = Schema.TaggedStruct("SequenceConflict", {})
/** The receiver refuses the event permanently (business code). */
export const Rejected = Schema.TaggedStruct("Rejected", { code: Schema.String })
/**
 * A transient failure: try again later. `retryAfter`, when given, is the least delay the receiver
 * asks for, in ticks (milliseconds on the default clock), e.g. an HTTP `Retry-After`; the queue
 * waits at least that long, but never longer than its policy's `backoffCap`.
 */
export const Retry = Schema.TaggedStruct("Retry", { reason: Schema.String, retryAfter: Schema.optional(Schema.NonNegativeInt) })
/** The receiver expects an earlier seq of this flow first. */
export const Gap = Schema.TaggedStruct("Gap", { expected: Seq })
/** The receiver's answer to one delivery. */
export const DeliveryReply = Schema.Union(Accepted, Duplicate, IdConflict, SequenceConflict, Rejected, Retry, Gap)
/** @see DeliveryReply */
export type DeliveryReply = typeof DeliveryReply.Type

/** The event is done. */
export const Acked = Schema.TaggedStruct("Acked", {})
/** The event is ready again from `nextAt`. */
export const RetryScheduled = Schema.TaggedStruct("RetryScheduled", { nextAt: Tick })
/** The event stopped at the head of its flow until an operator redrives it. */
export const Quarantined = Schema.TaggedStruct("Quarantined", { reason: Schema.String })
/** The token is not the event's current claim: nothing changed. */
export const Stale = Schema.TaggedStruct("Stale", {})
/** The token's lease ran out before the settle: nothing changed. */
export const Expired = Schema.TaggedStruct("Expired", {})
/** Result of `settle`. */
export const SettleOutcome = Schema.Union(Acked, RetryScheduled, Quarantined, Stale, Expired)
/** @see SettleOutcome */
export type SettleOutcome = typeof SettleOutcome.Type

/** The event left quarantine and is ready under a new generation. */
export const Redriven = Schema.TaggedStruct("Redriven", { generation: Generation })
/** @see Redriven */
export type Redriven = typeof Redriven.Type

/** The head left its flow for good (never delivered); `nextHead` is the flow's head now (null: none). */
export const Discarded = Schema.TaggedStruct("Discarded", { generation: Generation, nextHead: Schema.NullOr(Schema.String) })
/** @see Discarded */
export type Discarded = typeof Discarded.Type
