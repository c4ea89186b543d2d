/**
 * The decisions behind an operator's actions during an incident, as pure functions: what is kept
 * of a receiver's reason, what a discard does to a quarantined head, which quarantined heads a
 * bulk redrive selects, and the audit trail's kinds of action. The queue (`RelayQueue.make`) reads,
 * calls these, and writes back, as it does with `Protocol`.
 */
import { Either, Schema } from "effect"
import { EventNotFound, GenerationMismatch, MissingReason, NotQuarantined } from "./Errors.js"
import type { EventId, FlowId, GroupId } from "./Ids.js"
import type { EventRecord, FlowRecord, Resume } from "./Records.js"

/** The most of a receiver's reason an event keeps, in UTF-8 bytes (the cut marker included). */
export const MaxKeptReasonBytes = 1024

/** What ends a reason that was cut to `MaxKeptReasonBytes`. */
export const CutMarker = "…[cut]"

const utf8 = new TextEncoder()

/**
 * A receiver's reason as an event keeps it: whole when it fits `MaxKeptReasonBytes`, else its
 * longest prefix of whole code points that fits with `CutMarker` after it. A receiver controls
 * this text, and the store keeps it on every retry: unbounded, one bad receiver would grow every
 * head it answers.
 */
export const boundReason = (reason: string): string => {
  // Fast path: a reason of at most a third of the bound in UTF-16 units fits (≤ 3 bytes each).
  if (reason.length * 3 <= MaxKeptReasonBytes || utf8.encode(reason).length <= MaxKeptReasonBytes) return reason
  const room = MaxKeptReasonBytes - utf8.encode(CutMarker).length
  let bytes = 0
  let kept = ""
  for (const char of reason) {
    const size = utf8.encode(char).length
    if (bytes + size > room) break
    bytes += size
    kept += char
  }
  return kept + CutMarker
}

/** An operator's request to take a quarantined head out of its flow for good. */
export interface DiscardRequest {
  readonly eventId: EventId
  readonly expectedGeneration: number
  readonly reason: string
  readonly actor?: string | undefined
}

/**
 * A quarantined head after an operator discards it: `discarded` (terminal, never delivered) under a
 * new generation, its last reason kept for the audit; the flow's next event becomes its head. The
 * same guards as a redrive: only a quarantined head, only at the generation the operator saw,
 * only with a reason. Nothing in the relay ever calls this on its own.
 */
export const discardEvent = (
  event: EventRecord | undefined,
  request: DiscardRequest
): Either.Either<EventRecord, EventNotFound | NotQuarantined | GenerationMismatch | MissingReason> => {
  if (request.reason.trim().length === 0) return Either.left(new MissingReason({ eventId: request.eventId }))
  if (event === undefined) return Either.left(new EventNotFound({ eventId: request.eventId }))
  if (event.state !== "quarantined") return Either.left(new NotQuarantined({ eventId: event.eventId, state: event.state }))
  if (event.generation !== request.expectedGeneration) {
    return Either.left(new GenerationMismatch({ eventId: event.eventId, expected: request.expectedGeneration, actual: event.generation }))
  }
  return Either.right({ ...event, state: "discarded", generation: event.generation + 1, leaseUntil: null })
}

/**
 * Where the flow resumes once its head at `seq` is discarded: after the event before it, or, when
 * that event was itself discarded (the flow resumed at `seq`), after what the run before it
 * resumed after — discards in a row make one run.
 */
export const resumeAfterDiscard = (resume: Resume | undefined, seq: number): Resume =>
  ({ seq: seq + 1, after: resume !== undefined && resume.seq === seq ? resume.after : seq - 1 })

/**
 * The `previousSeq` a delivery of `head` carries: what its flow resumed after, when `head` is the
 * event right after a run of discarded ones; else undefined (the event before it was acked).
 */
export const previousSeqOf = (flow: FlowRecord, head: EventRecord): number | undefined =>
  flow.resume !== undefined && flow.resume.seq === head.seq ? flow.resume.after : undefined

/** Whether an event's state ends it: acked (delivered) or discarded (an operator took it out). */
export const isSettledForGood = (state: EventRecord["state"]): boolean => state === "acked" || state === "discarded"

/**
 * Which quarantined heads a bulk redrive takes (every given field must match). A quarantined
 * event's `nextAt` is when it was quarantined (`Protocol.settleEvent` sets it then).
 */
export interface RedriveFilter {
  readonly group?: GroupId | undefined
  readonly flowId?: FlowId | undefined
  /** Flows whose id starts with this text. */
  readonly flowPrefix?: string | undefined
  /** Heads whose reason contains this text (case-sensitive). */
  readonly reasonContains?: string | undefined
  /** Quarantined at or before this tick. */
  readonly quarantinedBefore?: number | undefined
  /** Quarantined at or after this tick. */
  readonly quarantinedAfter?: number | undefined
}

/** Whether a quarantined head of a flow of `group` matches `filter` (what the SQL of each backend states too). */
export const matchesRedriveFilter = (event: EventRecord, group: string | null, filter: RedriveFilter): boolean =>
  event.state === "quarantined" &&
  (filter.group === undefined || group === filter.group) &&
  (filter.flowId === undefined || event.flowId === filter.flowId) &&
  (filter.flowPrefix === undefined || event.flowId.startsWith(filter.flowPrefix)) &&
  (filter.reasonContains === undefined || (event.reason ?? "").includes(filter.reasonContains)) &&
  (filter.quarantinedBefore === undefined || event.nextAt <= filter.quarantinedBefore) &&
  (filter.quarantinedAfter === undefined || event.nextAt >= filter.quarantinedAfter)

/** Heads a bulk redrive changes in one transaction: a process that dies leaves whole pages done. */
export const RedrivePageSize = 100

/** The kinds of operator action the audit trail records. */
export const AuditAction = Schema.Literal("redrive", "discard", "pause", "resume", "policy")
/** @see AuditAction */
export type AuditAction = typeof AuditAction.Type
