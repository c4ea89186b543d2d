/**
 * The queue's rows as SQL returns them: a Schema per row shape (integers may come back as numbers,
 * int8 strings or bigints; the schemas coerce them) and the mapping to the domain's records.
 */
import { Exit, Schema } from "effect"
import { parseStored } from "../../domain/Json.js"
import { AuditAction } from "../../domain/Operator.js"
import type { DedupRecord, NewEvent, PruneCandidate, StoredGroup } from "../../domain/Operations.js"
import { EventState } from "../../domain/Records.js"
import type { AuditRecord, EventRecord, FlowRecord, GroupRecord } from "../../domain/Records.js"
import type { FlowView, GroupView } from "../../services/QueueBackend.js"
import { decodeRows, SqlInt } from "./Store.js"

// Ids this library stored were validated when they came in: rows only check they are strings.
const StoredEventId = Schema.String.pipe(Schema.brand("fair-relay/EventId"))
const StoredFlowId = Schema.String.pipe(Schema.brand("fair-relay/FlowId"))
const StoredGroupId = Schema.String.pipe(Schema.brand("fair-relay/GroupId"))
const NullableInt = Schema.NullOr(SqlInt)

const EventColumns = {
  event_id: StoredEventId,
  flow_id: StoredFlowId,
  seq: SqlInt,
  body: Schema.String,
  state: EventState,
  next_at: SqlInt,
  lease_until: NullableInt,
  generation: SqlInt,
  attempts: SqlInt,
  lifetime_attempts: SqlInt,
  reason: Schema.NullOr(Schema.String)
}

/** A `relay_event` row. */
export const EventRow = Schema.Struct(EventColumns)

const FlowColumns = {
  flow_id: StoredFlowId,
  seq: SqlInt,
  served: SqlInt,
  head_seq: NullableInt,
  eligible_at: NullableInt,
  weight: SqlInt,
  burst: SqlInt,
  group_id: Schema.NullOr(StoredGroupId),
  resume_seq: NullableInt,
  resume_after: NullableInt
}

/** A `relay_flow` row. */
export const FlowRow = Schema.Struct(FlowColumns)

const GroupColumns = {
  group_id: StoredGroupId,
  served: SqlInt,
  weight: SqlInt,
  burst: SqlInt
}

/** A `relay_group` row. */
export const GroupRow = Schema.Struct(GroupColumns)

/** A `relay_group` row and whether any of its flows has a head (1 or 0). */
export const StoredGroupRow = Schema.Struct({ ...GroupColumns, active: SqlInt })

/** A `relay_group` row with the counts of its flows, and whether it is paused (1 or 0). */
export const GroupViewRow = Schema.Struct({ ...GroupColumns, flows: SqlInt, waiting: SqlInt, paused: SqlInt })

/** A `relay_flow` row with whether it is paused (1 or 0). */
export const FlowViewRow = Schema.Struct({ ...FlowColumns, paused: SqlInt })

/**
 * A `relay_flow` row joined with its head's `relay_event` row (head columns prefixed `h_`) and its
 * group's turn (prefixed `g_`, null for a flow of no group).
 */
export const CandidateRow = Schema.Struct({
  ...FlowColumns,
  g_served: NullableInt,
  g_weight: NullableInt,
  g_burst: NullableInt,
  h_event_id: StoredEventId,
  h_body: Schema.String,
  h_state: EventState,
  h_next_at: SqlInt,
  h_lease_until: NullableInt,
  h_generation: SqlInt,
  h_attempts: SqlInt,
  h_lifetime_attempts: SqlInt,
  h_reason: Schema.NullOr(Schema.String)
})

/** A `relay_audit` row. */
export const AuditRow = Schema.Struct({
  event_id: Schema.NullOr(StoredEventId),
  reason: Schema.String,
  generation: NullableInt,
  tick: SqlInt,
  actor: Schema.NullOr(Schema.String),
  action: AuditAction,
  target: Schema.NullOr(Schema.String)
})

/** Id, flow, seq and body text of a stored event, or body hash of a pruned one (what a re-enqueue compares). */
export const IdentityRow = Schema.Struct({
  event_id: StoredEventId,
  flow_id: StoredFlowId,
  seq: SqlInt,
  body: Schema.NullOr(Schema.String),
  body_hash: Schema.optional(Schema.NullOr(Schema.String))
})

/** An acked event as pruning reads it. */
export const PruneCandidateRow = Schema.Struct({
  event_id: StoredEventId,
  flow_id: StoredFlowId,
  seq: SqlInt,
  state: EventState,
  acked_at: NullableInt,
  body: Schema.String
})

/** A prune candidate row as the domain's record. */
export const toPruneCandidate = (row: typeof PruneCandidateRow.Type): PruneCandidate => ({
  eventId: row.event_id,
  flowId: row.flow_id,
  seq: row.seq,
  state: row.state,
  ackedAt: row.acked_at,
  bodyText: row.body
})

/** The `relay_pruned` row a dedup record is stored as. */
export const dedupRow = (record: DedupRecord) => ({
  event_id: record.eventId,
  flow_id: record.flowId,
  seq: record.seq,
  body_hash: record.bodyHash,
  pruned_at: record.prunedAt
})

/** The `relay_clock` row. */
export const ClockRow = Schema.Struct({ tick: SqlInt, ticket: SqlInt })

/** Count of events in one state, and the claims they took (the sum of their lifetime attempts). */
export const StateCountRow = Schema.Struct({ state: EventState, n: SqlInt, claims: SqlInt })

/** An aggregate that may be null (MIN over nothing), and a count. */
export const AggregateRow = Schema.Struct({ at: NullableInt, n: Schema.optional(SqlInt) })

/** An event row as a record (the body parsed from its canonical text). */
export const toEvent = (row: typeof EventRow.Type): EventRecord => ({
  eventId: row.event_id,
  flowId: row.flow_id,
  seq: row.seq,
  body: parseStored(row.body),
  state: row.state,
  nextAt: row.next_at,
  leaseUntil: row.lease_until,
  generation: row.generation,
  attempts: row.attempts,
  lifetimeAttempts: row.lifetime_attempts,
  reason: row.reason
})

/** A flow row as a record. */
export const toFlow = (row: typeof FlowRow.Type): FlowRecord => {
  const flow: FlowRecord = {
    flowId: row.flow_id,
    seq: row.seq,
    served: row.served,
    headSeq: row.head_seq,
    eligibleAt: row.eligible_at,
    weight: row.weight,
    burst: row.burst,
    group: row.group_id
  }
  // Absent until the flow's first discard: the records of other flows stay as they were.
  return row.resume_seq === null || row.resume_after === null ? flow : Object.assign(flow, { resume: { seq: row.resume_seq, after: row.resume_after } })
}

/** A group row as a record. */
export const toGroup = (row: typeof GroupRow.Type): GroupRecord => ({
  groupId: row.group_id,
  served: row.served,
  weight: row.weight,
  burst: row.burst
})

/** A group row as enqueue reads it. */
export const toStoredGroup = (row: typeof StoredGroupRow.Type): StoredGroup => Object.assign(toGroup(row), { active: row.active === 1 })

/** A group row with counts as operators see it. */
export const toGroupView = (row: typeof GroupViewRow.Type): GroupView =>
  Object.assign(toGroup(row), { flows: row.flows, waiting: row.waiting, paused: row.paused !== 0 })

/** A flow row as operators see it. */
export const toFlowView = (row: typeof FlowViewRow.Type): FlowView => Object.assign(toFlow(row), { paused: row.paused !== 0 })

/** A candidate row as the flow, its group and its head. */
export const toCandidate = (row: typeof CandidateRow.Type) => ({
  flow: toFlow(row),
  group: row.group_id === null
    ? undefined
    : { groupId: row.group_id, served: row.g_served!, weight: row.g_weight!, burst: row.g_burst! },
  head: toEvent({
    event_id: row.h_event_id,
    flow_id: row.flow_id,
    seq: row.head_seq!,
    body: row.h_body,
    state: row.h_state,
    next_at: row.h_next_at,
    lease_until: row.h_lease_until,
    generation: row.h_generation,
    attempts: row.h_attempts,
    lifetime_attempts: row.h_lifetime_attempts,
    reason: row.h_reason
  })
})

/** An audit row as a record. */
export const toAudit = (row: typeof AuditRow.Type): AuditRecord => ({
  eventId: row.event_id,
  reason: row.reason,
  generation: row.generation,
  tick: row.tick,
  actor: row.actor,
  action: row.action,
  target: row.target
})

/** Decoders of each row shape (a row that does not decode is a defect: the store is not ours; see `Store.decodeRows`). */
export const decode = {
  events: decodeRows(EventRow),
  flows: decodeRows(FlowRow),
  groups: decodeRows(GroupRow),
  storedGroups: decodeRows(StoredGroupRow),
  groupViews: decodeRows(GroupViewRow),
  flowViews: decodeRows(FlowViewRow),
  candidates: decodeRows(CandidateRow),
  audit: decodeRows(AuditRow),
  identities: decodeRows(IdentityRow),
  pruneCandidates: decodeRows(PruneCandidateRow),
  clock: decodeRows(ClockRow),
  counts: decodeRows(StateCountRow),
  aggregate: decodeRows(AggregateRow)
}

/** Rows decoded to the domain's records (an `Exit`: composed without the runtime, see `Store.decodeRows`). */
export const records = {
  events: (rows: ReadonlyArray<unknown>) => Exit.map(decode.events(rows), (decoded) => decoded.map(toEvent)),
  flows: (rows: ReadonlyArray<unknown>) => Exit.map(decode.flows(rows), (decoded) => decoded.map(toFlow)),
  groups: (rows: ReadonlyArray<unknown>) => Exit.map(decode.groups(rows), (decoded) => decoded.map(toGroup)),
  candidates: (rows: ReadonlyArray<unknown>) => Exit.map(decode.candidates(rows), (decoded) => decoded.map(toCandidate)),
  audit: (rows: ReadonlyArray<unknown>) => Exit.map(decode.audit(rows), (decoded) => decoded.map(toAudit)),
  storedGroups: (rows: ReadonlyArray<unknown>) => Exit.map(decode.storedGroups(rows), (decoded) => decoded.map(toStoredGroup)),
  groupViews: (rows: ReadonlyArray<unknown>) => Exit.map(decode.groupViews(rows), (decoded) => decoded.map(toGroupView)),
  flowViews: (rows: ReadonlyArray<unknown>) => Exit.map(decode.flowViews(rows), (decoded) => decoded.map(toFlowView)),
  pruneCandidates: (rows: ReadonlyArray<unknown>) => Exit.map(decode.pruneCandidates(rows), (decoded) => decoded.map(toPruneCandidate))
}

/** The row an event is written back as (mutable columns and its key). */
export const eventUpdate = (event: EventRecord) => ({
  event_id: event.eventId,
  state: event.state,
  next_at: event.nextAt,
  lease_until: event.leaseUntil,
  generation: event.generation,
  attempts: event.attempts,
  lifetime_attempts: event.lifetimeAttempts,
  reason: event.reason
})

/**
 * The row a new event is inserted as. Rows that add columns to another row's are made with
 * `Object.assign` onto the fresh row: a spread followed by fields its source lacks makes V8 build
 * a new map on every call.
 */
export const eventInsert = ({ bodyText, record }: NewEvent) =>
  Object.assign(eventUpdate(record), { flow_id: record.flowId, seq: record.seq, body: bodyText })

/** The row a flow is stored as (its `resume` is written by a discard alone, `QueueWrites.setResume`). */
export const flowRow = (flow: FlowRecord): Omit<typeof FlowRow.Type, "resume_seq" | "resume_after"> => ({
  flow_id: flow.flowId,
  seq: flow.seq,
  served: flow.served,
  head_seq: flow.headSeq,
  eligible_at: flow.eligibleAt,
  weight: flow.weight,
  burst: flow.burst,
  group_id: flow.group
})

/** The row a group is stored as (its `eligible_at` is kept by the store, see `refreshGroups`). */
export const groupRow = (group: GroupRecord): typeof GroupRow.Type => ({
  group_id: group.groupId,
  served: group.served,
  weight: group.weight,
  burst: group.burst
})
