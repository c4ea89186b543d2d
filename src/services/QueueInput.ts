/**
 * Validation of every queue operation's arguments, shared by all backends: malformed input is an
 * `InvalidInput` before anything is read or written. Each decoder is built once, here: a schema
 * made per call would be compiled again per call.
 */
import { Effect, Either, Schema } from "effect"
import { InvalidInput, MissingReason } from "../domain/Errors.js"
import { EventId, FlowId, Generation, GroupId } from "../domain/Ids.js"
import { decodeInput, decodeInputEither, fromDecoded, shorten } from "../domain/Input.js"
import { canonicalize } from "../domain/Json.js"
import type { EnqueueCommand } from "../domain/Operations.js"
import type { DiscardRequest } from "../domain/Operator.js"
import { DeliveryReply } from "../domain/Outcomes.js"
import { isBlankReason, MaxReasonLength } from "../domain/Protocol.js"
import type { RedriveRequest } from "../domain/Protocol.js"
import { decodePolicyInput, makePolicy } from "../domain/Policy.js"
import type { RelayPolicy } from "../domain/Policy.js"
import { EventState } from "../domain/Records.js"
import type { Token } from "../domain/Records.js"
import type { FlowQuery, GroupQuery } from "./QueueBackend.js"
import * as Retention from "./Retention.js"

/** Largest batch a single transaction takes. */
export const MaxBatchSize = 10_000

/** Largest flow weight. */
export const MaxWeight = 1_000_000

const Weight = Schema.Int.pipe(Schema.between(1, MaxWeight))
const Limit = Schema.optional(Schema.UndefinedOr(Schema.Int.pipe(Schema.between(1, MaxBatchSize))))
const Actor = Schema.optional(Schema.UndefinedOr(Schema.String.pipe(Schema.maxLength(200))))
const TokenFields = Schema.Struct({ eventId: EventId, generation: Generation })

const enqueueFields = decodeInput(
  Schema.Struct({
    eventId: EventId,
    flowId: FlowId,
    body: Schema.Unknown,
    weight: Schema.optional(Schema.UndefinedOr(Weight)),
    group: Schema.optional(Schema.UndefinedOr(GroupId))
  }),
  "enqueue"
)
const enqueueItems = decodeInput(Schema.Array(Schema.Unknown).pipe(Schema.maxItems(MaxBatchSize)), "enqueueBatch")
const settleToken = decodeInputEither(TokenFields, "settle")
const settleReply = decodeInputEither(DeliveryReply, "settle")
const SettleItems = Schema.Array(Schema.Struct({ token: TokenFields, reply: DeliveryReply })).pipe(Schema.maxItems(MaxBatchSize))
const settleItems = decodeInput(SettleItems, "settleBatch")
const exchangeItems = decodeInputEither(SettleItems, "settleAndClaim")
const claimLimit = decodeInputEither(Schema.Int.pipe(Schema.between(0, MaxBatchSize)), "settleAndClaim")
const pairs = (items: typeof SettleItems.Type) => items.map(({ reply, token }) => [token, reply] as const)
const redriveFields = decodeInput(
  Schema.Struct({
    eventId: EventId,
    expectedGeneration: Generation,
    reason: Schema.String.pipe(Schema.maxLength(MaxReasonLength)),
    actor: Actor
  }),
  "redrive"
)
const batchSize = decodeInput(Schema.Int.pipe(Schema.between(1, MaxBatchSize)), "claimBatch")
const flowWeight = decodeInput(Schema.Struct({ flowId: FlowId, weight: Weight }), "setFlowWeight")
const groupWeight = decodeInput(Schema.Struct({ groupId: GroupId, weight: Weight }), "setGroupWeight")
const eventFilter = decodeInput(
  Schema.Struct({
    state: Schema.optional(Schema.UndefinedOr(EventState)),
    flowId: Schema.optional(Schema.UndefinedOr(FlowId)),
    afterEventId: Schema.optional(Schema.UndefinedOr(EventId)),
    afterSeq: Schema.optional(Schema.UndefinedOr(Schema.Int.pipe(Schema.nonNegative()))),
    limit: Limit
  }).pipe(
    // One flow's events are listed in seq order, so they page by seq; all flows' by event id.
    Schema.filter((filter) =>
      filter.flowId === undefined
        ? filter.afterSeq === undefined || "afterSeq pages one flow's events: give flowId with it"
        : filter.afterEventId === undefined || "one flow's events are listed in seq order: page them with afterSeq, not afterEventId"
    )
  ),
  "events"
)
const pageFilter = decodeInput(
  Schema.Struct({
    after: Schema.optional(Schema.UndefinedOr(FlowId)),
    afterServed: Schema.optional(Schema.UndefinedOr(Schema.Int)),
    order: Schema.optional(Schema.UndefinedOr(Schema.Literal("id", "turn"))),
    group: Schema.optional(Schema.UndefinedOr(GroupId)),
    limit: Limit
  }),
  "flows"
)
const groupFilter = decodeInput(Schema.Struct({ after: Schema.optional(Schema.UndefinedOr(GroupId)), limit: Limit }), "groups")
const auditFilter = decodeInput(Schema.Struct({ eventId: Schema.optional(Schema.UndefinedOr(EventId)), limit: Limit }), "audit")
const resetClockFields = decodeInput(
  Schema.Struct({
    reason: Schema.String.pipe(
      Schema.maxLength(MaxReasonLength),
      Schema.filter((reason) => !isBlankReason(reason), { message: () => "reason must not be blank" })
    ),
    actor: Actor
  }),
  "resetClock"
)

/** Validates an enqueue: ids, and a JSON body within the policy's size limit. */
export const decodeEnqueue = (input: unknown, policy: RelayPolicy): Effect.Effect<EnqueueCommand, InvalidInput> =>
  enqueueFields(input).pipe(
    Effect.flatMap(({ body, eventId, flowId, group, weight }) =>
      Either.match(canonicalize(body, policy.maxBodyBytes), {
        onLeft: (message) => Effect.fail(new InvalidInput({ operation: "enqueue", message: shorten(message) })),
        onRight: (canonical) => Effect.succeed({ eventId, flowId, body: canonical, weight, group })
      })
    )
  )

/** Validates every item of an enqueue batch; the first invalid item refuses the batch. */
export const decodeEnqueueBatch = (inputs: unknown, policy: RelayPolicy): Effect.Effect<ReadonlyArray<EnqueueCommand>, InvalidInput> =>
  Effect.flatMap(enqueueItems(inputs), (items) =>
    Effect.forEach(items, (item, i) =>
      Effect.mapError(decodeEnqueue(item, policy), (error) =>
        new InvalidInput({ operation: "enqueueBatch", message: `item ${i}: ${error.message}` }))))

/** Validates a settle: a well-formed token and a reply with a known tag. */
export const decodeSettle = (token: unknown, reply: unknown): Effect.Effect<readonly [Token, DeliveryReply], InvalidInput> =>
  fromDecoded(Either.all([settleToken(token), settleReply(reply)]))

/** Validates every item of a settle batch; one malformed item refuses the whole batch. */
export const decodeSettleBatch = (items: unknown): Effect.Effect<ReadonlyArray<readonly [Token, DeliveryReply]>, InvalidInput> =>
  Effect.map(settleItems(items), pairs)

/** Validates a settle-and-claim: replies as `settleBatch` takes them, and a claim limit from 0 (settle only) to `MaxBatchSize`. */
export const decodeSettleAndClaim = (
  items: unknown,
  limit: unknown
): Effect.Effect<readonly [ReadonlyArray<readonly [Token, DeliveryReply]>, number], InvalidInput> =>
  fromDecoded(Either.all([Either.map(exchangeItems(items), pairs), claimLimit(limit)]))


/** Validates a redrive; a blank reason is `MissingReason` before anything is read. */
export const decodeRedrive = (input: unknown): Effect.Effect<RedriveRequest, InvalidInput | MissingReason> =>
  redriveFields(input).pipe(
    Effect.filterOrFail(
      (request) => !isBlankReason(request.reason),
      (request) => new MissingReason({ eventId: request.eventId })
    )
  )

const discardFields = decodeInput(
  Schema.Struct({
    eventId: EventId,
    expectedGeneration: Generation,
    reason: Schema.String.pipe(Schema.maxLength(MaxReasonLength)),
    actor: Actor
  }),
  "discard"
)

/** Validates a discard; a blank reason is `MissingReason` before anything is read. */
export const decodeDiscard = (input: unknown): Effect.Effect<DiscardRequest, InvalidInput | MissingReason> =>
  discardFields(input).pipe(
    Effect.filterOrFail(
      (request) => !isBlankReason(request.reason),
      (request) => new MissingReason({ eventId: request.eventId })
    )
  )

/** Validates a batch size: an integer from 1 to `MaxBatchSize`. */
export const decodeBatchSize = (limit: unknown): Effect.Effect<number, InvalidInput> => batchSize(limit)

/** Validates a flow weight: an integer from 1 to `MaxWeight`. */
export const decodeFlowWeight = (input: unknown): Effect.Effect<{ readonly flowId: FlowId; readonly weight: number }, InvalidInput> =>
  flowWeight(input)

/** Validates a group weight: an integer from 1 to `MaxWeight`. */
export const decodeGroupWeight = (input: unknown): Effect.Effect<{ readonly groupId: GroupId; readonly weight: number }, InvalidInput> =>
  groupWeight(input)

/** Validates a groups filter; the limit defaults to 100. */
export const decodeGroupFilter = (filter: unknown): Effect.Effect<GroupQuery, InvalidInput> =>
  Effect.map(groupFilter(filter), (f) => ({ after: f.after, limit: f.limit ?? 100 }))

/** Validates an event id given on its own. */
export const decodeEventId = (eventId: unknown, operation: string): Effect.Effect<EventId, InvalidInput> =>
  decodeInput(EventId, operation)(eventId)

/** Validates an `events` filter; the limit defaults to 100. */
export const decodeEventFilter = (filter: unknown) => Effect.map(eventFilter(filter), (f) => ({ ...f, limit: f.limit ?? 100 }))

/** Validates a flows filter: id order by default, or turn order with a `(afterServed, after)` cursor. */
export const decodePageFilter = (filter: unknown): Effect.Effect<FlowQuery, InvalidInput> =>
  Effect.flatMap(pageFilter(filter), ({ after, afterServed, group, limit, order }): Effect.Effect<FlowQuery, InvalidInput> => {
    if (order !== "turn") {
      return afterServed === undefined
        ? Effect.succeed({ order: "id", after, group, limit: limit ?? 100 })
        : Effect.fail(new InvalidInput({ operation: "flows", message: "afterServed pages the turn order; pass order: \"turn\"" }))
    }
    if ((after === undefined) !== (afterServed === undefined)) {
      return Effect.fail(new InvalidInput({ operation: "flows", message: "a turn-order cursor needs both after and afterServed" }))
    }
    return Effect.succeed({
      order: "turn",
      after: after === undefined ? undefined : { served: afterServed!, flowId: after },
      group,
      limit: limit ?? 100
    })
  })

const NonBlankReason = Schema.String.pipe(
  Schema.maxLength(MaxReasonLength),
  Schema.filter((reason) => !isBlankReason(reason), { message: () => "reason must not be blank" })
)
const pauseFields = (operation: string) =>
  decodeInput(
    Schema.Union(
      Schema.Struct({ flowId: FlowId, reason: NonBlankReason, actor: Actor }),
      Schema.Struct({ group: GroupId, reason: NonBlankReason, actor: Actor })
    ),
    operation
  )
const pauseInput = { pause: pauseFields("pause"), resume: pauseFields("resume") }

/** Validates a pause or resume: one flow or one group, and a non-blank reason (and who asks). */
export const decodePause = (input: unknown, operation: "pause" | "resume") => pauseInput[operation](input)

const Text = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(1000))
const Tick = Schema.Int.pipe(Schema.nonNegative())
const redriveAllFields = decodeInput(
  Schema.Struct({
    filter: Schema.Struct({
      group: Schema.optional(Schema.UndefinedOr(GroupId)),
      flowId: Schema.optional(Schema.UndefinedOr(FlowId)),
      flowPrefix: Schema.optional(Schema.UndefinedOr(Text)),
      reasonContains: Schema.optional(Schema.UndefinedOr(Text)),
      quarantinedBefore: Schema.optional(Schema.UndefinedOr(Tick)),
      quarantinedAfter: Schema.optional(Schema.UndefinedOr(Tick)),
      all: Schema.optional(Schema.UndefinedOr(Schema.Boolean))
    }).pipe(Schema.filter((f) =>
      f.all === true || [f.group, f.flowId, f.flowPrefix, f.reasonContains, f.quarantinedBefore, f.quarantinedAfter].some((v) => v !== undefined) ||
      "name at least one filter (group, flowId, flowPrefix, reasonContains, quarantinedBefore, quarantinedAfter), or all: true"
    )),
    reason: NonBlankReason,
    actor: Actor,
    dryRun: Schema.optional(Schema.UndefinedOr(Schema.Boolean)),
    pageSize: Schema.optional(Schema.UndefinedOr(Schema.Int.pipe(Schema.between(1, 1000))))
  }),
  "redriveAll"
)

/** Validates a bulk redrive: a filter that names something, a non-blank reason, a page size from 1 to 1000. */
export const decodeRedriveAll = (input: unknown) => redriveAllFields(input)

const setPolicyFields = decodeInput(
  Schema.Struct({
    policy: Schema.optional(Schema.UndefinedOr(Schema.Object)),
    retention: Schema.optional(Schema.Unknown),
    reason: NonBlankReason,
    actor: Actor
  }),
  "setPolicy"
)
const policyKeys = new Set(["leaseTicks", "retryBudget", "backoffBase", "backoffCap"])

/**
 * Validates a policy change: a non-blank reason, and only the live settings (lease, retry budget,
 * backoff, retention), the settings made whole on `current`, checked as a layer's policy and
 * retention are.
 */
export const decodeSetPolicy = (input: unknown, current: RelayPolicy) =>
  Effect.flatMap(setPolicyFields(input), ({ actor, policy = {}, reason, retention }) => {
    const given = Object.fromEntries(Object.entries(policy).filter(([, value]) => value !== undefined))
    const unknown = Object.keys(given).filter((key) => !policyKeys.has(key))
    if (unknown.length > 0 || (Object.keys(given).length === 0 && retention === undefined)) {
      return Effect.fail(new InvalidInput({
        operation: "setPolicy",
        message: unknown.length > 0
          ? `only leaseTicks, retryBudget, backoffBase and backoffCap change on a live store, not ${unknown.join(", ")}`
          : "name at least one of leaseTicks, retryBudget, backoffBase, backoffCap, retention"
      }))
    }
    const named = Either.flatMap(decodePolicyInput(given), (named) => Either.map(makePolicy(named, current), () => named))
    return Either.match(named, {
      onLeft: (message) => Effect.fail(new InvalidInput({ operation: "setPolicy", message: shorten(message) })),
      onRight: (named) =>
        Effect.map(
          retention === undefined
            ? Effect.succeed(undefined)
            : Retention.decodeRetentionChange(retention, "setPolicy"),
          // The named settings alone: the write applies them over the store's own, never this
          // instance's view of the others (another process may have changed them since).
          (retention) => ({ named, retention, reason, actor })
        )
    })
  })

/** Validates a clock reset: a non-blank reason (and who asks). */
export const decodeResetClock = (input: unknown) => resetClockFields(input)

/** Validates an audit filter; the limit defaults to 100. */
export const decodeAuditFilter = (filter: unknown) => Effect.map(auditFilter(filter), (f) => ({ ...f, limit: f.limit ?? 100 }))
