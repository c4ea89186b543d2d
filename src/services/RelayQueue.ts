/**
 * The queue contract: enqueue, claim, settle, redrive and inspect. Backends (`SqliteRelayQueue`,
 * later PostgreSQL) implement it; the input checks every backend shares live here.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Either, Schema } from "effect"
import type { ClockRegressed, EnqueueConflict, EventNotFound, RedriveError } from "../domain/Errors.js"
import { InvalidInput, MissingReason } from "../domain/Errors.js"
import { EventId, FlowId, Generation } from "../domain/Ids.js"
import { decodeInput, shorten } from "../domain/Input.js"
import { canonicalize } from "../domain/Json.js"
import type { CanonicalBody } from "../domain/Json.js"
import { DeliveryReply } from "../domain/Outcomes.js"
import type { Claimed, ClaimOutcome, EnqueueResult, Redriven, SettleOutcome } from "../domain/Outcomes.js"
import { isBlankReason } from "../domain/Protocol.js"
import type { RedriveRequest } from "../domain/Protocol.js"
import type { RelayPolicy } from "../domain/Policy.js"
import { EventState } from "../domain/Records.js"
import type { AuditRecord, ClockRecord, EventRecord, FlowRecord, Snapshot, Token } from "../domain/Records.js"

/** A new event as a caller writes it. */
export interface EnqueueInput {
  readonly eventId: string
  readonly flowId: string
  readonly body: unknown
  /** Sets the flow's weight (integer ≥ 1; a new flow defaults to 1). */
  readonly weight?: number | undefined
}

/** A flow's weight as a caller sets it. */
export interface FlowWeightInput {
  readonly flowId: string
  readonly weight: number
}

/** A claim token as a caller passes it back. */
export interface TokenInput {
  readonly eventId: string
  readonly generation: number
}

/** One item of `settleBatch`. */
export interface SettleInput {
  readonly token: TokenInput
  readonly reply: DeliveryReply
}

/** Largest batch a single transaction takes. */
export const MaxBatchSize = 10_000

/** An operator's redrive as a caller writes it. */
export interface RedriveInput {
  readonly eventId: string
  readonly expectedGeneration: number
  readonly reason: string
  /** Who decides (recorded in the audit row with the reason). */
  readonly actor?: string | undefined
}

/** Counts for monitoring: events by state, eligible heads, and how long the oldest has waited. */
export interface QueueStats {
  readonly byState: Readonly<Record<EventState, number>>
  readonly eligibleHeads: number
  readonly oldestEligibleAgeMillis: number
  readonly clock: ClockRecord
}

/** Which events `events` lists (by event id, a page at a time). */
export interface EventFilter {
  readonly state?: EventState | undefined
  readonly flowId?: string | undefined
  /** List events whose id sorts after this one (the last id of the previous page). */
  readonly afterEventId?: string | undefined
  /** At most this many (default 100, at most 10000). */
  readonly limit?: number | undefined
}

/** A page of a listing in id order. */
export interface PageFilter {
  readonly after?: string | undefined
  readonly limit?: number | undefined
}

/** Which audit rows `audit` lists. */
export interface AuditFilter {
  readonly eventId?: string | undefined
  readonly limit?: number | undefined
}

/** The queue operations. Every write runs in one transaction holding the write lock from its start. */
export interface RelayQueueService {
  /** The policy this queue was opened with. */
  readonly policy: RelayPolicy
  /** Stores a new event at the next seq of its flow, or recognises one already stored. */
  readonly enqueue: (
    input: EnqueueInput
  ) => Effect.Effect<EnqueueResult, EnqueueConflict | ClockRegressed | InvalidInput | SqlError>
  /**
   * Enqueues many events in one transaction, in order (events of one flow get consecutive seqs).
   * All or nothing: one conflict or invalid item refuses the whole batch.
   */
  readonly enqueueBatch: (
    inputs: ReadonlyArray<EnqueueInput>
  ) => Effect.Effect<ReadonlyArray<EnqueueResult>, EnqueueConflict | ClockRegressed | InvalidInput | SqlError>
  /**
   * Sets a flow's weight: over a round it gets `weight` opportunities for each one of a weight-1
   * flow. Creates the flow (without events) if it does not exist yet.
   */
  readonly setFlowWeight: (input: FlowWeightInput) => Effect.Effect<void, ClockRegressed | InvalidInput | SqlError>
  /** Claims the eligible head with the smallest `(served, flowId)`, or reports `Idle`. */
  readonly claim: Effect.Effect<ClaimOutcome, ClockRegressed | SqlError>
  /**
   * Claims up to `limit` eligible heads in one transaction, at most one per flow, in the order
   * `limit` single claims would take them (each takes its own ticket). Empty when idle.
   */
  readonly claimBatch: (limit: number) => Effect.Effect<ReadonlyArray<typeof Claimed.Type>, ClockRegressed | InvalidInput | SqlError>
  /** Records a receiver's reply for a claim. */
  readonly settle: (
    token: TokenInput,
    reply: DeliveryReply
  ) => Effect.Effect<SettleOutcome, ClockRegressed | InvalidInput | SqlError>
  /** Records many replies in one transaction, one outcome per item, in order. */
  readonly settleBatch: (
    items: ReadonlyArray<SettleInput>
  ) => Effect.Effect<ReadonlyArray<SettleOutcome>, ClockRegressed | InvalidInput | SqlError>
  /** Releases a quarantined head under a new generation, with an audited reason. */
  readonly redrive: (input: RedriveInput) => Effect.Effect<Redriven, RedriveError | ClockRegressed | InvalidInput | SqlError>
  /** The whole store, read in one transaction (for tests and small stores; see `stats`). */
  readonly snapshot: Effect.Effect<Snapshot, SqlError>
  /** Events matching `filter`, in event-id order (for operators; `afterEventId` pages). */
  readonly events: (filter?: EventFilter) => Effect.Effect<ReadonlyArray<EventRecord>, InvalidInput | SqlError>
  /** Flows in flow-id order, a page at a time. */
  readonly flows: (filter?: PageFilter) => Effect.Effect<ReadonlyArray<FlowRecord>, InvalidInput | SqlError>
  /** One event with its audit rows. */
  readonly inspect: (
    eventId: string
  ) => Effect.Effect<{ readonly event: EventRecord; readonly audit: ReadonlyArray<AuditRecord> }, EventNotFound | InvalidInput | SqlError>
  /** Redrive decisions in the order they were made. */
  readonly audit: (filter?: AuditFilter) => Effect.Effect<ReadonlyArray<AuditRecord>, InvalidInput | SqlError>
  /** Monitoring counts, read in one transaction (counting by state scans the event table). */
  readonly stats: Effect.Effect<QueueStats, SqlError>
  /** Completes when this queue instance gets new work (enqueue, redrive, an ack); for sleeping workers. */
  readonly awaitWork: Effect.Effect<void>
}

/** The queue service. */
export class RelayQueue extends Context.Tag("fair-relay/RelayQueue")<RelayQueue, RelayQueueService>() {}


/** A validated enqueue. */
export interface EnqueueCommand {
  readonly eventId: EventId
  readonly flowId: FlowId
  readonly body: CanonicalBody
  readonly weight?: number | undefined
}

/** Largest flow weight. */
export const MaxWeight = 1_000_000

const Weight = Schema.Int.pipe(Schema.between(1, MaxWeight))

const EnqueueFields = Schema.Struct({
  eventId: EventId,
  flowId: FlowId,
  body: Schema.Unknown,
  weight: Schema.optional(Schema.UndefinedOr(Weight))
})

/** Validates an enqueue: ids, and a JSON body within the policy's size limit. */
export const decodeEnqueue = (input: unknown, policy: RelayPolicy): Effect.Effect<EnqueueCommand, InvalidInput> =>
  decodeInput(EnqueueFields, "enqueue")(input).pipe(
    Effect.flatMap(({ body, eventId, flowId, weight }) =>
      Either.match(canonicalize(body, policy.maxBodyBytes), {
        onLeft: (message) => Effect.fail(new InvalidInput({ operation: "enqueue", message: shorten(message) })),
        onRight: (canonical) => Effect.succeed({ eventId, flowId, body: canonical, weight })
      })
    )
  )

/** Validates every item of an enqueue batch; the first invalid item refuses the batch. */
export const decodeEnqueueBatch = (
  inputs: unknown,
  policy: RelayPolicy
): Effect.Effect<ReadonlyArray<EnqueueCommand>, InvalidInput> =>
  Effect.flatMap(
    decodeInput(Schema.Array(Schema.Unknown).pipe(Schema.maxItems(MaxBatchSize)), "enqueueBatch")(inputs),
    (items) =>
      Effect.forEach(items, (item, i) =>
        Effect.mapError(decodeEnqueue(item, policy), (error) =>
          new InvalidInput({ operation: "enqueueBatch", message: `item ${i}: ${error.message}` })))
  )

const TokenFields = Schema.Struct({ eventId: EventId, generation: Generation })

/** Validates a settle: a well-formed token and a reply with a known tag. */
export const decodeSettle = (
  token: unknown,
  reply: unknown
): Effect.Effect<readonly [Token, DeliveryReply], InvalidInput> =>
  Effect.all([decodeInput(TokenFields, "settle")(token), decodeInput(DeliveryReply, "settle")(reply)])

const RedriveFields = Schema.Struct({
  eventId: EventId,
  expectedGeneration: Generation,
  reason: Schema.String.pipe(Schema.maxLength(10_000)),
  actor: Schema.optional(Schema.UndefinedOr(Schema.String.pipe(Schema.maxLength(200))))
})

/** Validates a redrive; a blank reason is `MissingReason` before anything is read. */
export const decodeRedrive = (input: unknown): Effect.Effect<RedriveRequest, InvalidInput | MissingReason> =>
  decodeInput(RedriveFields, "redrive")(input).pipe(
    Effect.filterOrFail(
      (request) => !isBlankReason(request.reason),
      (request) => new MissingReason({ eventId: request.eventId })
    )
  )

/** Validates a batch size: an integer from 1 to `MaxBatchSize`. */
export const decodeBatchSize = (limit: unknown): Effect.Effect<number, InvalidInput> =>
  decodeInput(Schema.Int.pipe(Schema.between(1, MaxBatchSize)), "claimBatch")(limit)

/** Validates every item of a settle batch; one malformed item refuses the whole batch. */
export const decodeSettleBatch = (
  items: unknown
): Effect.Effect<ReadonlyArray<readonly [Token, DeliveryReply]>, InvalidInput> =>
  decodeInput(
    Schema.Array(Schema.Struct({ token: TokenFields, reply: DeliveryReply })).pipe(Schema.maxItems(MaxBatchSize)),
    "settleBatch"
  )(items).pipe(
    Effect.map((decoded) => decoded.map(({ reply, token }) => [token, reply] as const))
  )

/** Validates a flow weight: an integer from 1 to `MaxWeight`. */
export const decodeFlowWeight = (input: unknown): Effect.Effect<{ readonly flowId: FlowId; readonly weight: number }, InvalidInput> =>
  decodeInput(Schema.Struct({ flowId: FlowId, weight: Weight }), "setFlowWeight")(input)

const Limit = Schema.optional(Schema.UndefinedOr(Schema.Int.pipe(Schema.between(1, MaxBatchSize))))

/** Validates an event id given on its own. */
export const decodeEventId = (eventId: unknown, operation: string): Effect.Effect<EventId, InvalidInput> =>
  decodeInput(EventId, operation)(eventId)

/** Validates an `events` filter; the limit defaults to 100. */
export const decodeEventFilter = (filter: unknown) =>
  decodeInput(
    Schema.Struct({
      state: Schema.optional(Schema.UndefinedOr(EventState)),
      flowId: Schema.optional(Schema.UndefinedOr(FlowId)),
      afterEventId: Schema.optional(Schema.UndefinedOr(EventId)),
      limit: Limit
    }),
    "events"
  )(filter).pipe(Effect.map((f) => ({ ...f, limit: f.limit ?? 100 })))

/** Validates a page filter; the limit defaults to 100. */
export const decodePageFilter = (filter: unknown) =>
  decodeInput(Schema.Struct({ after: Schema.optional(Schema.UndefinedOr(FlowId)), limit: Limit }), "flows")(filter).pipe(
    Effect.map((f) => ({ ...f, limit: f.limit ?? 100 }))
  )

/** Validates an audit filter; the limit defaults to 100. */
export const decodeAuditFilter = (filter: unknown) =>
  decodeInput(Schema.Struct({ eventId: Schema.optional(Schema.UndefinedOr(EventId)), limit: Limit }), "audit")(filter).pipe(
    Effect.map((f) => ({ ...f, limit: f.limit ?? 100 }))
  )
