/**
 * The queue's rows as SQL returns them, decoded by Schema into the domain's records. Integers may
 * come back as numbers (SQLite), strings (PostgreSQL int8) or bigints; the schemas coerce them.
 */
import { Schema } from "effect"
import { EventId, FlowId } from "../../domain/Ids.js"
import { parseStored } from "../../domain/Json.js"
import type { NewEvent } from "../../domain/Operations.js"
import { AuditRecord, ClockRecord, EventRecord, EventState, FlowRecord } from "../../domain/Records.js"

/** A SQL integer, whatever the driver returns it as. */
const SqlInt = Schema.transform(Schema.Union(Schema.Number, Schema.String, Schema.BigIntFromSelf), Schema.Int, {
  strict: true,
  decode: (value) => Number(value),
  encode: (value) => value
})

const NullableInt = Schema.NullOr(SqlInt)

/** A `relay_event` row. */
export const EventRow = Schema.Struct({
  event_id: EventId,
  flow_id: FlowId,
  seq: SqlInt,
  body: Schema.String,
  state: EventState,
  next_at: SqlInt,
  lease_until: NullableInt,
  generation: SqlInt,
  attempts: SqlInt,
  lifetime_attempts: SqlInt,
  reason: Schema.NullOr(Schema.String)
})

/** A `relay_event` row decoded into an `EventRecord` (the body parsed from its canonical text). */
export const Event = Schema.transform(EventRow, Schema.typeSchema(EventRecord), {
  strict: true,
  decode: (row) => ({
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
  }),
  encode: (event) => ({
    event_id: event.eventId,
    flow_id: event.flowId,
    seq: event.seq,
    body: JSON.stringify(event.body),
    state: event.state,
    next_at: event.nextAt,
    lease_until: event.leaseUntil,
    generation: event.generation,
    attempts: event.attempts,
    lifetime_attempts: event.lifetimeAttempts,
    reason: event.reason
  })
})

/** A `relay_flow` row decoded into a `FlowRecord`. */
export const Flow = Schema.transform(
  Schema.Struct({
    flow_id: FlowId,
    seq: SqlInt,
    served: SqlInt,
    head_seq: NullableInt,
    eligible_at: NullableInt,
    weight: SqlInt,
    burst: SqlInt
  }),
  Schema.typeSchema(FlowRecord),
  {
    strict: true,
    decode: (row) => ({
      flowId: row.flow_id,
      seq: row.seq,
      served: row.served,
      headSeq: row.head_seq,
      eligibleAt: row.eligible_at,
      weight: row.weight,
      burst: row.burst
    }),
    encode: (flow) => ({
      flow_id: flow.flowId,
      seq: flow.seq,
      served: flow.served,
      head_seq: flow.headSeq,
      eligible_at: flow.eligibleAt,
      weight: flow.weight,
      burst: flow.burst
    })
  }
)

/** A `relay_audit` row decoded into an `AuditRecord`. */
export const Audit = Schema.transform(
  Schema.Struct({ event_id: EventId, reason: Schema.String, generation: SqlInt, tick: SqlInt, actor: Schema.NullOr(Schema.String) }),
  Schema.typeSchema(AuditRecord),
  {
    strict: true,
    decode: (row) => ({ eventId: row.event_id, reason: row.reason, generation: row.generation, tick: row.tick, actor: row.actor }),
    encode: (audit) => ({ event_id: audit.eventId, reason: audit.reason, generation: audit.generation, tick: audit.tick, actor: audit.actor })
  }
)

/** The `relay_clock` row. */
export const Clock = Schema.transform(Schema.Struct({ tick: SqlInt, ticket: SqlInt }), Schema.typeSchema(ClockRecord), {
  strict: true,
  decode: (row) => row,
  encode: (clock) => clock
})

/** Id, flow, seq and body text of a stored event (what a re-enqueue compares). */
export const Identity = Schema.transform(
  Schema.Struct({ event_id: EventId, flow_id: FlowId, seq: SqlInt, body: Schema.String }),
  Schema.Struct({ eventId: Schema.typeSchema(EventId), flowId: Schema.typeSchema(FlowId), seq: Schema.Int, bodyText: Schema.String }),
  {
    strict: true,
    decode: (row) => ({ eventId: row.event_id, flowId: row.flow_id, seq: row.seq, bodyText: row.body }),
    encode: (identity) => ({ event_id: identity.eventId, flow_id: identity.flowId, seq: identity.seq, body: identity.bodyText })
  }
)

/** A flow row joined with its head's event row (head columns prefixed `h_`). */
export const Candidate = Schema.Struct({
  flow_id: FlowId,
  seq: SqlInt,
  served: SqlInt,
  head_seq: NullableInt,
  eligible_at: NullableInt,
  weight: SqlInt,
  burst: SqlInt,
  h_event_id: EventId,
  h_body: Schema.String,
  h_state: EventState,
  h_next_at: SqlInt,
  h_lease_until: NullableInt,
  h_generation: SqlInt,
  h_attempts: SqlInt,
  h_lifetime_attempts: SqlInt,
  h_reason: Schema.NullOr(Schema.String)
})

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

/** The row a new event is inserted as. */
export const eventInsert = ({ bodyText, record }: NewEvent) => ({ ...eventUpdate(record), flow_id: record.flowId, seq: record.seq, body: bodyText })

/** Count of events in one state. */
export const StateCount = Schema.Struct({ state: EventState, n: SqlInt })

/** An aggregate that may be null (MIN over nothing) and a count. */
export const Aggregate = Schema.Struct({ at: NullableInt, n: Schema.optional(SqlInt) })
