/**
 * Validation of every queue operation's arguments, shared by all backends: malformed input is an
 * `InvalidInput` before anything is read or written.
 */
import { Effect, Either, Schema } from "effect"
import { InvalidInput, MissingReason } from "../domain/Errors.js"
import { EventId, FlowId, Generation } from "../domain/Ids.js"
import { decodeInput, shorten } from "../domain/Input.js"
import { canonicalize } from "../domain/Json.js"
import type { EnqueueCommand } from "../domain/Operations.js"
import { DeliveryReply } from "../domain/Outcomes.js"
import { isBlankReason, MaxReasonLength } from "../domain/Protocol.js"
import type { RedriveRequest } from "../domain/Protocol.js"
import type { RelayPolicy } from "../domain/Policy.js"
import { EventState } from "../domain/Records.js"
import type { Token } from "../domain/Records.js"
import type { FlowQuery } from "./QueueBackend.js"

/** Largest batch a single transaction takes. */
export const MaxBatchSize = 10_000

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
  reason: Schema.String.pipe(Schema.maxLength(MaxReasonLength)),
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

/** Validates a flows filter: id order by default, or turn order with a `(afterServed, after)` cursor. */
export const decodePageFilter = (filter: unknown): Effect.Effect<FlowQuery, InvalidInput> =>
  decodeInput(
    Schema.Struct({
      after: Schema.optional(Schema.UndefinedOr(FlowId)),
      afterServed: Schema.optional(Schema.UndefinedOr(Schema.Int)),
      order: Schema.optional(Schema.UndefinedOr(Schema.Literal("id", "turn"))),
      limit: Limit
    }),
    "flows"
  )(filter).pipe(
    Effect.flatMap(({ after, afterServed, limit, order }): Effect.Effect<FlowQuery, InvalidInput> => {
      if (order !== "turn") {
        return afterServed === undefined
          ? Effect.succeed({ order: "id", after, limit: limit ?? 100 })
          : Effect.fail(new InvalidInput({ operation: "flows", message: "afterServed pages the turn order; pass order: \"turn\"" }))
      }
      if ((after === undefined) !== (afterServed === undefined)) {
        return Effect.fail(new InvalidInput({ operation: "flows", message: "a turn-order cursor needs both after and afterServed" }))
      }
      return Effect.succeed({
        order: "turn",
        after: after === undefined ? undefined : { served: afterServed!, flowId: after },
        limit: limit ?? 100
      })
    })
  )

/** Validates a clock reset: a non-blank reason (and who asks). */
export const decodeResetClock = (input: unknown) =>
  decodeInput(
    Schema.Struct({
      reason: Schema.String.pipe(Schema.maxLength(MaxReasonLength), Schema.filter((r) => !isBlankReason(r), { message: () => "reason must not be blank" })),
      actor: Schema.optional(Schema.UndefinedOr(Schema.String.pipe(Schema.maxLength(200))))
    }),
    "resetClock"
  )(input)

/** Validates an audit filter; the limit defaults to 100. */
export const decodeAuditFilter = (filter: unknown) =>
  decodeInput(Schema.Struct({ eventId: Schema.optional(Schema.UndefinedOr(EventId)), limit: Limit }), "audit")(filter).pipe(
    Effect.map((f) => ({ ...f, limit: f.limit ?? 100 }))
  )
