/**
 * The stored records of the queue, as `snapshot` returns them (camelCase fields).
 */
import { Schema } from "effect"
import { EventId, FlowId, Generation, GroupId, Seq, Tick } from "./Ids.js"
import { AuditAction } from "./Operator.js"

/**
 * Lifecycle of an event. Only the head of a flow (lowest seq neither acked nor discarded) ever
 * changes state; `discarded` is an operator's decision about a quarantined head, never the relay's.
 */
export const EventState = Schema.Literal("ready", "inflight", "acked", "quarantined", "discarded")
/** @see EventState */
export type EventState = typeof EventState.Type

/** Any JSON value; bodies are validated by `canonicalize` before they are stored. */
export const JsonBody = Schema.Unknown

/** One event as stored by the queue. */
export const EventRecord = Schema.Struct({
  eventId: EventId,
  flowId: FlowId,
  seq: Seq,
  body: JsonBody,
  state: EventState,
  nextAt: Tick,
  leaseUntil: Schema.NullOr(Tick),
  generation: Generation,
  attempts: Schema.Int,
  lifetimeAttempts: Schema.Int,
  /** The last reason a receiver gave (bounded): why the head is quarantined, or why its last try is retried. */
  reason: Schema.NullOr(Schema.String)
})
/** @see EventRecord */
export type EventRecord = typeof EventRecord.Type

/**
 * Where a flow resumes after its latest run of discarded events: `seq`, the event right after the
 * run, and `after`, the seq of the last event before the run (acked, or 0 when the run starts the
 * flow). A delivery of `seq` carries `after` as its `previousSeq`, so a receiver that checks seqs
 * sees that nothing deliverable lies between them.
 */
export const Resume = Schema.Struct({ seq: Seq, after: Schema.Int.pipe(Schema.nonNegative()) })
/** @see Resume */
export type Resume = typeof Resume.Type

/**
 * One flow: the last seq it allocated and its place in the rotation (`served`: the ticket of the
 * claim that ended its last turn, or its admission value).
 * `headSeq` / `eligibleAt` cache the head's position and the tick it becomes claimable, so a claim
 * never scans events; `eligibleAt` is null while the head is quarantined or the flow is drained.
 */
export const FlowRecord = Schema.Struct({
  /** The flow. */
  flowId: FlowId,
  /** The last seq it allocated. */
  seq: Schema.Int,
  /** Its turn value: the ticket of the claim that ended its last turn, or its admission value. */
  served: Schema.Int,
  /** Its head's seq (null: drained). */
  headSeq: Schema.NullOr(Seq),
  /** When its head becomes claimable (null: quarantined or drained). */
  eligibleAt: Schema.NullOr(Tick),
  /** Opportunities per round relative to a weight-1 flow. */
  weight: Schema.Int.pipe(Schema.positive()),
  /** Claims already used of the flow's current turn (always 0 at weight 1). */
  burst: Schema.Int.pipe(Schema.nonNegative()),
  /** The group the flow's first event named, fixed from then on; null: a group of its own. */
  group: Schema.NullOr(GroupId),
  /** Set by a discard, changed only by the next one; absent while nothing of the flow was discarded. */
  resume: Schema.optional(Resume)
})
/** @see FlowRecord */
export type FlowRecord = typeof FlowRecord.Type

/**
 * One group of flows and its place in the rotation across groups: the same turn rules as a flow
 * (`served`, `weight`, `burst`), charged by every claim of one of its flows.
 */
export const GroupRecord = Schema.Struct({
  /** The group. */
  groupId: GroupId,
  /** Its turn value, as a flow's. */
  served: Schema.Int,
  /** Opportunities per round relative to a weight-1 group. */
  weight: Schema.Int.pipe(Schema.positive()),
  /** Claims already used of the group's current turn. */
  burst: Schema.Int.pipe(Schema.nonNegative())
})
/** @see GroupRecord */
export type GroupRecord = typeof GroupRecord.Type

/** One operator decision, appended and never changed. */
export const AuditRecord = Schema.Struct({
  /** The event it touched (null for a flow, a group, or the policy). */
  eventId: Schema.NullOr(EventId),
  reason: Schema.String,
  /** The event's generation after it (null when no event was touched). */
  generation: Schema.NullOr(Generation),
  tick: Tick,
  /** Who decided (operator name, tool), when the caller said. */
  actor: Schema.NullOr(Schema.String),
  /** What was done. */
  action: AuditAction,
  /** What else it names: `flow:ID`, `group:ID`, or the policy it set (JSON); null for an event alone. */
  target: Schema.NullOr(Schema.String)
})
/** @see AuditRecord */
export type AuditRecord = typeof AuditRecord.Type

/** The persisted relay time and the global claim counter. */
export const ClockRecord = Schema.Struct({ tick: Tick, ticket: Schema.Int })
/** @see ClockRecord */
export type ClockRecord = typeof ClockRecord.Type

/** The whole queue store, for inspection and tests. */
export const Snapshot = Schema.Struct({
  clock: ClockRecord,
  flows: Schema.Array(FlowRecord),
  groups: Schema.Array(GroupRecord),
  events: Schema.Array(EventRecord),
  audit: Schema.Array(AuditRecord)
})
/** @see Snapshot */
export type Snapshot = typeof Snapshot.Type

/** Proof of one claim: settle only counts for the generation it was issued for. */
export const Token = Schema.Struct({ eventId: EventId, generation: Generation })
/** @see Token */
export type Token = typeof Token.Type

/**
 * What a worker sends to a receiver. `previousSeq` is present only when an operator discarded the
 * events just before this one: the seq of the flow's last event before them (0: none), which the
 * receiver has applied when it has applied everything deliverable before `seq`.
 */
export const Delivery = Schema.Struct({
  eventId: EventId,
  flowId: FlowId,
  seq: Seq,
  body: JsonBody,
  previousSeq: Schema.optional(Schema.Int.pipe(Schema.nonNegative()))
}).pipe(
  Schema.filter((d) => d.previousSeq === undefined || d.previousSeq < d.seq || "previousSeq must be below seq")
)
/** @see Delivery */
export type Delivery = typeof Delivery.Type
/** A delivery as a caller writes it (plain strings, validated on receipt). */
export type DeliveryInput = typeof Delivery.Encoded
