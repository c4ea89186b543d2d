/**
 * The notable changes of a queue, as alerting code receives them (`RelayQueue.changes`): a head
 * quarantined, and each operator decision that changed something (redrive, discard, pause, resume,
 * a policy change). Plain tagged records: branch with `Match.tagsExhaustive`, so a new kind breaks
 * the build of code that must handle it.
 */
import { Schema } from "effect"
import { EventId, FlowId, Generation, GroupId } from "./Ids.js"
import { ProtocolSettings, protocolKeys, retentionKeys, StoredRetention } from "./Policy.js"

/** Who decided, when the caller said (as the audit row keeps it). */
const Actor = Schema.NullOr(Schema.String)

/** A head stopped at its flow's head: `reason` is the receiver's (bounded, as the event keeps it). */
export const Quarantined = Schema.TaggedStruct("Quarantined", {
  eventId: EventId,
  flowId: FlowId,
  /** The flow's group; null when it has none (or when it could not be read right after the settle). */
  group: Schema.NullOr(GroupId),
  reason: Schema.String,
  generation: Generation
})

/** An operator released a quarantined head (`redrive`, or one head of `redriveAll`); `generation` is its new one. */
export const Redriven = Schema.TaggedStruct("Redriven", {
  eventId: EventId,
  flowId: FlowId,
  generation: Generation,
  reason: Schema.String,
  actor: Actor
})

/** An operator took a quarantined head out of its flow for good. */
export const Discarded = Schema.TaggedStruct("Discarded", {
  eventId: EventId,
  flowId: FlowId,
  generation: Generation,
  reason: Schema.String,
  actor: Actor
})

/** The flow or group a pause or resume named. */
export const PauseTarget = Schema.Struct({ kind: Schema.Literal("flow", "group"), id: Schema.String })

/** A flow or group that ran was paused (pausing a paused one changes nothing and is not told). */
export const Paused = Schema.TaggedStruct("Paused", { target: PauseTarget, reason: Schema.String, actor: Actor })

/** A paused flow or group was resumed. */
export const Resumed = Schema.TaggedStruct("Resumed", { target: PauseTarget, reason: Schema.String, actor: Actor })

/**
 * The store's policy changed (`setPolicy`): the keys that changed, the settings now stored, and
 * the stored retention (absent while the store keeps none).
 */
export const PolicyChanged = Schema.TaggedStruct("PolicyChanged", {
  changed: Schema.Array(Schema.Literal(...protocolKeys, ...retentionKeys)),
  settings: ProtocolSettings,
  retention: Schema.optional(StoredRetention),
  version: Schema.Int,
  reason: Schema.String,
  actor: Actor
})

/** One notable change of a queue. */
export const NotableChange = Schema.Union(Quarantined, Redriven, Discarded, Paused, Resumed, PolicyChanged)
/** @see NotableChange */
export type NotableChange = typeof NotableChange.Type
