/**
 * The relay protocol as pure functions over records: which head is eligible, what a claim, a
 * reply or a redrive does to an event. Every backend calls these inside its transactions, so
 * the decisions are made in one place and tested without a database.
 */
import { Either, Match } from "effect"
import { ClockRegressed, EnqueueConflict, EventNotFound, GenerationMismatch, MissingReason, NotQuarantined } from "./Errors.js"
import type { RedriveError } from "./Errors.js"
import type { EventId, FlowId } from "./Ids.js"
import { boundReason } from "./Operator.js"
import type { Claimed, DeliveryReply, SettleOutcome } from "./Outcomes.js"
import { retryDelayAtLeast } from "./Policy.js"
import type { RelayPolicy } from "./Policy.js"
import type { ClockRecord, DeliveryInput, EventRecord, FlowRecord, Token } from "./Records.js"

/**
 * Checks a write's time against the persisted tick. `now` below the tick is refused in "strict"
 * mode (the caller changes nothing) and accepted in "clamp" mode (`regressed` says so): the
 * operation reckons with its own `now` either way. `clock` is what a write that changes something
 * stores: the tick never moves backwards.
 */
export const advanceClock = (
  clock: ClockRecord,
  now: number,
  mode: RelayPolicy["clock"] = "strict"
): Either.Either<{ readonly clock: ClockRecord; readonly regressed: boolean }, ClockRegressed> => {
  if (now >= clock.tick) return Either.right({ clock: { ...clock, tick: now }, regressed: false })
  return mode === "clamp"
    ? Either.right({ clock, regressed: true })
    : Either.left(new ClockRegressed({ now, tick: clock.tick }))
}

/**
 * The tick from which a head can be claimed: a ready head when its backoff ends, an inflight head
 * when its lease expires. A quarantined or acked event is never claimable.
 */
export const eligibleAt = (event: EventRecord): number | null => {
  switch (event.state) {
    case "ready":
      return event.nextAt
    case "inflight":
      return event.leaseUntil
    default:
      return null
  }
}

/** Whether this head can be claimed at `now`. */
export const isEligible = (head: EventRecord, now: number): boolean => {
  const at = eligibleAt(head)
  return at !== null && at <= now
}

/**
 * Orders ids by Unicode code point, which is the byte order of their UTF-8 encoding: the order
 * SQLite's BINARY collation and PostgreSQL's "C" collation use. (JS `<` compares UTF-16 code
 * units, which disagrees above U+FFFF.)
 */
export const compareIds = (a: string, b: string): number => {
  const left = a[Symbol.iterator]()
  const right = b[Symbol.iterator]()
  for (;;) {
    const x = left.next()
    const y = right.next()
    if (x.done || y.done) return x.done && y.done ? 0 : x.done ? -1 : 1
    const d = x.value.codePointAt(0)! - y.value.codePointAt(0)!
    if (d !== 0) return d < 0 ? -1 : 1
  }
}

/** Fair order of opportunities: least recently served first, ties by flow id. */
export const compareTurn = (a: Pick<FlowRecord, "served" | "flowId">, b: Pick<FlowRecord, "served" | "flowId">): number =>
  a.served !== b.served ? a.served - b.served : compareIds(a.flowId, b.flowId)

/** A flow's place in the rotation: its turn value, weight, and claims used of its current turn. */
export interface Turn {
  /** The turn value: claims are offered in ascending `(served, id)`. */
  readonly served: number
  /** Claims in a row it keeps its place for. */
  readonly weight: number
  /** Claims taken of its current turn. */
  readonly burst: number
}

/**
 * A flow's turn after one of its claims took `ticket`. A flow of weight w keeps its place for w
 * claims in a row (a burst) and then moves behind everyone, so over a round it gets w
 * opportunities for each one of a weight-1 flow. Weight 1 is the seed rule: `served = ticket`.
 */
export const turnAfterClaim = (turn: Turn, ticket: number): Turn =>
  turn.burst + 1 >= turn.weight
    ? { ...turn, served: ticket, burst: 0 }
    : { ...turn, burst: turn.burst + 1 }

/**
 * A flow's turn after its weight is set: a new weight starts a new turn; re-sending the weight it
 * has (say, with every enqueue) keeps the turn it is in.
 */
export const turnWithWeight = (turn: Turn, weight: number): Turn =>
  weight === turn.weight ? turn : { ...turn, weight, burst: 0 }

/**
 * Where a flow enters the rotation when it gets a head again (new, or drained before): the seed
 * keeps `served` (0 for a new flow); "tail" takes the next ticket so it goes behind every flow
 * already waiting. Returns the flow's `served` and the clock after admission.
 */
export const admit = (
  policy: RelayPolicy,
  clock: ClockRecord,
  served: number
): { readonly served: number; readonly clock: ClockRecord } => {
  if (policy.admission === "seed") return { served, clock }
  const ticket = clock.ticket + 1
  return { served: ticket, clock: { ...clock, ticket } }
}

/** The head after it is claimed at `now`: inflight under a new generation, one attempt spent. */
export const claimEvent = (head: EventRecord, now: number, policy: RelayPolicy): EventRecord => ({
  ...head,
  state: "inflight",
  generation: head.generation + 1,
  attempts: head.attempts + 1,
  lifetimeAttempts: head.lifetimeAttempts + 1,
  leaseUntil: now + policy.leaseTicks
})

/** What a worker sends for a claim: the event, and the seq before it when discards skipped some (`Claimed.previousSeq`). */
export const deliveryOf = (claimed: typeof Claimed.Type): DeliveryInput => {
  const { event, previousSeq } = claimed
  return previousSeq === undefined
    ? { eventId: event.eventId, flowId: event.flowId, seq: event.seq, body: event.body }
    : { eventId: event.eventId, flowId: event.flowId, seq: event.seq, body: event.body, previousSeq }
}

/** What a reply means for the sender: done, stop the flow, or try again. */
export type Verdict =
  | { readonly _tag: "Ack" }
  | { readonly _tag: "Quarantine"; readonly reason: string }
  | { readonly _tag: "Retry"; readonly reason: string; readonly retryAfter?: number | undefined }

/** Classifies a receiver reply (docs/protocol.md, Replies). */
export const verdictOf: (reply: DeliveryReply) => Verdict = Match.type<DeliveryReply>().pipe(
  Match.tagsExhaustive({
    Accepted: (): Verdict => ({ _tag: "Ack" }),
    Duplicate: (): Verdict => ({ _tag: "Ack" }),
    IdConflict: (): Verdict => ({ _tag: "Quarantine", reason: "id_conflict" }),
    SequenceConflict: (): Verdict => ({ _tag: "Quarantine", reason: "sequence_conflict" }),
    Rejected: ({ code }): Verdict => ({ _tag: "Quarantine", reason: code }),
    Retry: ({ reason, retryAfter }): Verdict => ({ _tag: "Retry", reason, retryAfter }),
    Gap: ({ expected }): Verdict => ({ _tag: "Retry", reason: `gap: receiver expects seq ${expected}` })
  })
)

/** `verdictOf`, its reason bounded as the event keeps it (`boundReason`). */
export const boundedVerdict = (reply: DeliveryReply): Verdict => {
  const verdict = verdictOf(reply)
  return verdict._tag === "Ack" ? verdict : { ...verdict, reason: boundReason(verdict.reason) }
}

/** A settle decision: the outcome, and the event to store when it changes. */
export interface SettleDecision {
  /** What the settle answers. */
  readonly outcome: SettleOutcome
  /** The event as it is to be stored (undefined: unchanged). */
  readonly next: EventRecord | undefined
  /** When an ack happened (the settle's `now`): where the acked-event retention window starts. */
  readonly ackedAt?: number | undefined
}

const unchanged = (outcome: SettleOutcome): SettleDecision => ({ outcome, next: undefined })

/**
 * Applies a reply to the event a token was issued for. A token that is not the event's current
 * claim is `Stale`; a lease that ran out is `Expired`; neither changes anything. `draw` in [0, 1)
 * is the random draw used by full jitter.
 */
export const settleEvent = (
  event: EventRecord | undefined,
  token: Token,
  reply: DeliveryReply,
  now: number,
  policy: RelayPolicy,
  draw = 1
): SettleDecision => {
  if (event === undefined || event.generation !== token.generation || event.state !== "inflight") {
    return unchanged({ _tag: "Stale" })
  }
  if (event.leaseUntil === null || now >= event.leaseUntil) return unchanged({ _tag: "Expired" })
  const verdict = verdictOf(reply)
  switch (verdict._tag) {
    case "Ack":
      return { outcome: { _tag: "Acked" }, next: { ...event, state: "acked", leaseUntil: null }, ackedAt: now }
    case "Quarantine":
      return quarantine(event, verdict.reason, now)
    case "Retry": {
      if (event.attempts >= policy.retryBudget) return quarantine(event, verdict.reason, now)
      const nextAt = now + retryDelayAtLeast(policy, event.attempts, draw, verdict.retryAfter)
      // The last reason is kept (bounded), so an operator can see why a head is backing off.
      return {
        outcome: { _tag: "RetryScheduled", nextAt },
        next: { ...event, state: "ready", nextAt, leaseUntil: null, reason: boundReason(verdict.reason) }
      }
    }
  }
}

/**
 * A head stopped in place, its reason bounded (`boundReason`). A quarantined event is never
 * claimable, so its `nextAt` says when it was quarantined (what a bulk redrive filters on).
 */
const quarantine = (event: EventRecord, reply: string, now: number): SettleDecision => {
  const reason = boundReason(reply)
  return { outcome: { _tag: "Quarantined", reason }, next: { ...event, state: "quarantined", reason, nextAt: now, leaseUntil: null } }
}

/** An operator's request to release a quarantined head. */
export interface RedriveRequest {
  /** The quarantined head. */
  readonly eventId: EventId
  /** The generation the operator saw. */
  readonly expectedGeneration: number
  /** Why (required, recorded in the audit row). */
  readonly reason: string
  /** Who decides (recorded in the audit row). */
  readonly actor?: string | undefined
}

/** Longest reason an operator may give (redrive, clock reset). */
export const MaxReasonLength = 10_000

/** Whether a redrive reason says anything. */
export const isBlankReason = (reason: string): boolean => reason.trim().length === 0

/**
 * The only exit from quarantine: ready again under a new generation with a fresh round of
 * attempts. Id, flow, seq, body and lifetime attempts are kept.
 */
export const redriveEvent = (
  event: EventRecord | undefined,
  request: RedriveRequest,
  now: number
): Either.Either<EventRecord, RedriveError> => {
  if (isBlankReason(request.reason)) return Either.left(new MissingReason({ eventId: request.eventId }))
  if (event === undefined) return Either.left(new EventNotFound({ eventId: request.eventId }))
  if (event.state !== "quarantined") return Either.left(new NotQuarantined({ eventId: event.eventId, state: event.state }))
  if (event.generation !== request.expectedGeneration) {
    return Either.left(
      new GenerationMismatch({ eventId: event.eventId, expected: request.expectedGeneration, actual: event.generation })
    )
  }
  return Either.right({
    ...event,
    state: "ready",
    generation: event.generation + 1,
    attempts: 0,
    reason: null,
    nextAt: now,
    leaseUntil: null
  })
}

/**
 * What is stored under an id that is enqueued again: a stored event's canonical body text, or —
 * for an acked event pruned by retention — only a hash of it (`bodyText` null) in its dedup record.
 */
export interface StoredIdentity {
  /** The stored event's flow. */
  readonly flowId: FlowId
  /** Its seq in the flow. */
  readonly seq: number
  /** Its canonical body text (null: pruned, only the hash is kept). */
  readonly bodyText: string | null
  /** Hash of the canonical body text (the dedup record of a pruned event). */
  readonly bodyHash?: string | null | undefined
}

/**
 * Enqueue of an id that is already stored (or was pruned and is still in its dedup window): the
 * same flow and canonical body is the same event (`Existing`); anything else is a conflict.
 * Either way nothing changes. `hash` hashes a body text as the dedup record did.
 */
export const reenqueue = (
  stored: StoredIdentity,
  eventId: EventId,
  flowId: FlowId,
  bodyText: string,
  hash: (text: string) => string = () => ""
): Either.Either<{ readonly _tag: "Existing"; readonly seq: number }, EnqueueConflict> => {
  const sameBody = stored.bodyText !== null
    ? stored.bodyText === bodyText
    : typeof stored.bodyHash === "string" && stored.bodyHash.length > 0 && stored.bodyHash === hash(bodyText)
  if (stored.flowId === flowId && sameBody) return Either.right({ _tag: "Existing", seq: stored.seq })
  return Either.left(enqueueConflict(eventId, flowId, stored))
}

/** Why an id cannot be enqueued again: it is stored with another flow (or, same flow, another body). */
export const enqueueConflict = (
  eventId: EventId,
  flowId: FlowId,
  stored: { readonly flowId: string; readonly seq: number }
): EnqueueConflict => {
  const what = stored.flowId !== flowId ? `flow ${JSON.stringify(stored.flowId)}` : "another body"
  return new EnqueueConflict({
    eventId,
    storedFlowId: stored.flowId,
    storedSeq: stored.seq,
    message: `event ${JSON.stringify(eventId)} is already stored with ${what} (seq ${stored.seq})`
  })
}
