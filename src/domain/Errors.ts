/**
 * Failures a caller can act on. Database failures are not here: they surface as `SqlError`
 * from `@effect/sql`, with the driver's cause kept.
 */
import { Schema } from "effect"

/** The id is already stored with another flow or body; nothing changed. */
export class EnqueueConflict extends Schema.TaggedError<EnqueueConflict>()("EnqueueConflict", {
  /** The id enqueued again. */
  eventId: Schema.String,
  /** The flow the stored event has. */
  storedFlowId: Schema.String,
  /** The stored event's seq in its flow. */
  storedSeq: Schema.Number,
  message: Schema.String
}) {}

/** The flow belongs to another group (its first event fixed it) or to none; nothing changed. */
export class GroupConflict extends Schema.TaggedError<GroupConflict>()("GroupConflict", {
  /** The flow. */
  flowId: Schema.String,
  /** The group its first event fixed (null: none). */
  storedGroup: Schema.NullOr(Schema.String),
  /** The group this enqueue named. */
  requestedGroup: Schema.String
}) {
  /** The error as one line of text, for logs and operators. */
  override get message() {
    return `flow ${JSON.stringify(this.flowId)} belongs to ${
      this.storedGroup === null ? "no group" : `group ${JSON.stringify(this.storedGroup)}`
    }, not ${JSON.stringify(this.requestedGroup)}: a flow's group is fixed by its first event`
  }
}

/** The clock reads earlier than the persisted tick; nothing changed. */
export class ClockRegressed extends Schema.TaggedError<ClockRegressed>()("ClockRegressed", {
  /** The clock's reading. */
  now: Schema.Number,
  /** The persisted tick it is below. */
  tick: Schema.Number
}) {
  /** The error as one line of text, for logs and operators. */
  override get message() {
    return `clock regressed: now ${this.now} is below the persisted tick ${this.tick}`
  }
}

/** No event has this id. */
export class EventNotFound extends Schema.TaggedError<EventNotFound>()("EventNotFound", {
  /** The id asked for. */
  eventId: Schema.String
}) {
  /** The error as one line of text, for logs and operators. */
  override get message() {
    return `no event with id ${JSON.stringify(this.eventId)}`
  }
}

/** Redrive asked for an event that is not quarantined. */
export class NotQuarantined extends Schema.TaggedError<NotQuarantined>()("NotQuarantined", {
  /** The event. */
  eventId: Schema.String,
  /** Its state now. */
  state: Schema.String
}) {
  /** The error as one line of text, for logs and operators. */
  override get message() {
    return `event ${JSON.stringify(this.eventId)} is ${this.state}, not quarantined`
  }
}

/** Redrive was based on another generation than the stored one (someone acted first). */
export class GenerationMismatch extends Schema.TaggedError<GenerationMismatch>()("GenerationMismatch", {
  /** The event. */
  eventId: Schema.String,
  /** The generation the caller saw. */
  expected: Schema.Number,
  /** The stored generation. */
  actual: Schema.Number
}) {
  /** The error as one line of text, for logs and operators. */
  override get message() {
    return `event ${JSON.stringify(this.eventId)} is at generation ${this.actual}, not ${this.expected}`
  }
}

/** Redrive needs a non-blank reason for the audit trail. */
export class MissingReason extends Schema.TaggedError<MissingReason>()("MissingReason", {
  /** The event. */
  eventId: Schema.String
}) {
  /** The error as one line of text, for logs and operators. */
  override get message() {
    return `redrive of ${JSON.stringify(this.eventId)} needs a non-blank reason`
  }
}

/** An argument was malformed (id, body, token, reply, option); nothing was read or written. */
export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", {
  /** The operation refused (`enqueue`, `claimBatch`, a layer, …). */
  operation: Schema.String,
  message: Schema.String
}) {}

/** A pause or resume named a flow or group the store does not have; nothing changed. */
export class TargetNotFound extends Schema.TaggedError<TargetNotFound>()("TargetNotFound", {
  /** Whether a flow or a group was named. */
  kind: Schema.Literal("flow", "group"),
  /** The id named. */
  id: Schema.String
}) {
  /** The error as one line of text, for logs and operators. */
  override get message() {
    return `no ${this.kind} with id ${JSON.stringify(this.id)}`
  }
}

/** Errors of `redrive` other than database failures. */
export type RedriveError = EventNotFound | NotQuarantined | GenerationMismatch | MissingReason

/**
 * The file or database is not a store this library can open: another application's database,
 * the other kind of fair-relay store, or one written by a newer version. Nothing was changed.
 */
export class IncompatibleStore extends Schema.TaggedError<IncompatibleStore>()("IncompatibleStore", {
  /** The file or database. */
  store: Schema.String,
  message: Schema.String
}) {}

/**
 * A process opened a store with protocol settings (lease, budget, backoff, admission) that differ
 * from the ones the store was created with. Every process of one store must run the same protocol;
 * open it without those settings to adopt the stored ones. Nothing was changed.
 */
export class PolicyMismatch extends Schema.TaggedError<PolicyMismatch>()("PolicyMismatch", {
  /** The file or database. */
  store: Schema.String,
  /** The settings that differ. */
  settings: Schema.Array(Schema.String),
  message: Schema.String
}) {}
