/**
 * Each queue operation as a pure function from the records it read to the records it writes.
 * A backend reads what an operation asks for, calls it, and writes back the result in the same
 * transaction — SQL (or a map) holds the data, every decision is made here and in `Protocol`.
 */
import { Either } from "effect"
import type { EnqueueConflict } from "./Errors.js"
import type { EventId, FlowId } from "./Ids.js"
import type { CanonicalBody } from "./Json.js"
import type { Claimed, DeliveryReply, EnqueueResult, SettleOutcome } from "./Outcomes.js"
import type { RelayPolicy } from "./Policy.js"
import * as Protocol from "./Protocol.js"
import type { ClockRecord, EventRecord, FlowRecord, Token } from "./Records.js"

/** A validated enqueue. */
export interface EnqueueCommand {
  readonly eventId: EventId
  readonly flowId: FlowId
  readonly body: CanonicalBody
  readonly weight?: number | undefined
}

/** A new event and the canonical text of its body, as stored. */
export interface NewEvent {
  readonly record: EventRecord
  readonly bodyText: string
}

/** Where a flow's head is and when it can be claimed (the flow row's cached head). */
export interface Head {
  readonly flowId: FlowId
  readonly headSeq: number | null
  readonly eligibleAt: number | null
}

/** When an event was acked (stored with it: the start of its retention window). */
export interface AckStamp {
  readonly eventId: EventId
  readonly ackedAt: number
}

/** The writes of one operation. A write that changes nothing stores nothing, the clock included. */
export interface Changes {
  readonly inserted: ReadonlyArray<NewEvent>
  readonly events: ReadonlyArray<EventRecord>
  /** Ack times of the `events` that were acked by this operation. */
  readonly acked: ReadonlyArray<AckStamp>
  readonly flows: ReadonlyArray<FlowRecord>
  readonly heads: ReadonlyArray<Head>
  /** The clock to store, or undefined when nothing changed. */
  readonly clock: ClockRecord | undefined
}

const none: Omit<Changes, "clock"> = { inserted: [], events: [], acked: [], flows: [], heads: [] }

/** The clock after a write: `advanced` (tick = max(tick, now)) when something changed. */
const stored = (changed: boolean, advanced: ClockRecord): ClockRecord | undefined => (changed ? advanced : undefined)

/**
 * Enqueues `commands` in order. `identities` holds what is stored under the commands' ids, `flows`
 * the stored rows of their flows. Events of one flow get consecutive seqs; an id already stored
 * (or earlier in the batch) with the same flow and body is `Existing`, otherwise a conflict.
 * `hash` hashes a body text as a pruned event's dedup record did (see `prune`).
 */
export const enqueue = (
  commands: ReadonlyArray<EnqueueCommand>,
  identities: ReadonlyMap<string, Protocol.StoredIdentity>,
  flows: ReadonlyMap<string, FlowRecord>,
  clock: ClockRecord,
  now: number,
  policy: RelayPolicy,
  hash?: (text: string) => string
): Either.Either<{ readonly results: ReadonlyArray<EnqueueResult>; readonly changes: Changes }, EnqueueConflict> => {
  const known = new Map(identities)
  const current = new Map(flows)
  const touched = new Set<string>()
  const inserted: Array<NewEvent> = []
  const results: Array<EnqueueResult> = []
  let after = clock
  for (const command of commands) {
    const identity = known.get(command.eventId)
    if (identity !== undefined) {
      const existing = Protocol.reenqueue(identity, command.eventId, command.flowId, command.body.text, hash)
      if (Either.isLeft(existing)) return Either.left(existing.left)
      results.push(existing.right)
      continue
    }
    const [flow, admitted] = withEvent(current.get(command.flowId), command, after, now, policy)
    after = admitted
    current.set(flow.flowId, flow)
    touched.add(flow.flowId)
    known.set(command.eventId, { flowId: command.flowId, seq: flow.seq, bodyText: command.body.text })
    inserted.push({ record: newEvent(command, flow.seq, now), bodyText: command.body.text })
    results.push({ _tag: "Enqueued", seq: flow.seq })
  }
  const changed = inserted.length > 0
  return Either.right({
    results,
    changes: { ...none, inserted, flows: [...touched].map((id) => current.get(id)!), clock: stored(changed, after) }
  })
}

/** A flow after it gets its next event; a flow that had no head (new or drained) is admitted. */
const withEvent = (
  flow: FlowRecord | undefined,
  command: EnqueueCommand,
  clock: ClockRecord,
  now: number,
  policy: RelayPolicy
): readonly [FlowRecord, ClockRecord] => {
  if (flow === undefined) {
    const admitted = Protocol.admit(policy, clock, 0)
    const seq = 1
    return [{
      flowId: command.flowId,
      seq,
      served: admitted.served,
      headSeq: seq,
      eligibleAt: now,
      weight: command.weight ?? 1,
      burst: 0
    }, admitted.clock]
  }
  const seq = flow.seq + 1
  let next: FlowRecord = { ...flow, seq }
  let after = clock
  if (flow.headSeq === null) {
    const admitted = Protocol.admit(policy, clock, flow.served)
    after = admitted.clock
    // A flow that keeps its place (seed admission) keeps its turn too; a new place starts a new turn.
    next = { ...next, headSeq: seq, eligibleAt: now, served: admitted.served, burst: admitted.served === flow.served ? flow.burst : 0 }
  }
  if (command.weight !== undefined) next = { ...next, ...Protocol.turnWithWeight(next, command.weight) }
  return [next, after]
}

const newEvent = (command: EnqueueCommand, seq: number, now: number): EventRecord => ({
  eventId: command.eventId,
  flowId: command.flowId,
  seq,
  body: command.body.value,
  state: "ready",
  nextAt: now,
  leaseUntil: null,
  generation: 0,
  attempts: 0,
  lifetimeAttempts: 0,
  reason: null
})

/**
 * Sets a flow's weight; a flow named before its first event is created without a head (it enters
 * the rotation with that event). The weight a flow already has changes nothing.
 */
export const setWeight = (flow: FlowRecord | undefined, flowId: FlowId, weight: number, clock: ClockRecord): Changes => {
  if (flow === undefined) {
    const created: FlowRecord = { flowId, seq: 0, served: 0, headSeq: null, eligibleAt: null, weight, burst: 0 }
    return { ...none, flows: [created], clock }
  }
  const next = { ...flow, ...Protocol.turnWithWeight(flow, weight) }
  return next.weight === flow.weight ? { ...none, clock: undefined } : { ...none, flows: [next], clock }
}

/** A flow and its head, offered to a claim in turn order. */
export interface Candidate {
  readonly flow: FlowRecord
  readonly head: EventRecord
}

/**
 * Claims `candidates` — eligible heads already in turn order, one per flow — each with its own
 * ticket. Returns undefined if a candidate is not eligible (the backend's cache is inconsistent).
 */
export const claim = (
  candidates: ReadonlyArray<Candidate>,
  clock: ClockRecord,
  now: number,
  policy: RelayPolicy
): { readonly claims: ReadonlyArray<typeof Claimed.Type>; readonly changes: Changes } | undefined => {
  const claims: Array<typeof Claimed.Type> = []
  const events: Array<EventRecord> = []
  const flows: Array<FlowRecord> = []
  let ticket = clock.ticket
  for (const { flow, head } of candidates) {
    if (head.flowId !== flow.flowId || head.seq !== flow.headSeq || !Protocol.isEligible(head, now)) return undefined
    const claimed = Protocol.claimEvent(head, now, policy)
    ticket += 1
    const turn = Protocol.turnAfterClaim(flow, ticket)
    events.push(claimed)
    flows.push({ ...flow, served: turn.served, burst: turn.burst, eligibleAt: Protocol.eligibleAt(claimed) })
    claims.push({ _tag: "Claimed", token: { eventId: claimed.eventId, generation: claimed.generation }, event: claimed, leaseUntil: claimed.leaseUntil! })
  }
  return { claims, changes: { ...none, events, flows, clock: stored(claims.length > 0, { ...clock, ticket }) } }
}

/**
 * Applies replies in order to the events their tokens name (`events` holds those that exist); a
 * later item sees what an earlier one did. `draws` gives one random draw in [0, 1) per item.
 * Returns the outcomes and the events that changed; acked ones need their successor's row to move
 * the flow's head (`headAfter`).
 */
export const settle = (
  items: ReadonlyArray<readonly [Token, DeliveryReply]>,
  events: ReadonlyMap<string, EventRecord>,
  now: number,
  policy: RelayPolicy,
  draws: ReadonlyArray<number>
): {
  readonly outcomes: ReadonlyArray<SettleOutcome>
  readonly changed: ReadonlyArray<EventRecord>
  readonly acked: ReadonlyArray<AckStamp>
} => {
  const current = new Map(events)
  const changed = new Map<string, EventRecord>()
  const acked: Array<AckStamp> = []
  const outcomes = items.map(([token, reply], i) => {
    const decision = Protocol.settleEvent(current.get(token.eventId), token, reply, now, policy, draws[i] ?? 1)
    if (decision.next !== undefined) {
      current.set(token.eventId, decision.next)
      changed.set(token.eventId, decision.next)
    }
    if (decision.ackedAt !== undefined) acked.push({ eventId: token.eventId, ackedAt: decision.ackedAt })
    return decision.outcome
  })
  return { outcomes, changed: [...changed.values()], acked }
}

/**
 * The flow's cached head after `event` (its head) changed: the event itself while it is not acked,
 * else `next` (the flow's event at seq + 1, if any).
 */
export const headAfter = (event: EventRecord, next: EventRecord | undefined): Head =>
  event.state !== "acked"
    ? { flowId: event.flowId, headSeq: event.seq, eligibleAt: Protocol.eligibleAt(event) }
    : { flowId: event.flowId, headSeq: next?.seq ?? null, eligibleAt: next === undefined ? null : Protocol.eligibleAt(next) }

/** The changes of a settle: the changed events, their flows' heads, and the clock if anything changed. */
export const settleChanges = (
  changed: ReadonlyArray<EventRecord>,
  successors: ReadonlyMap<string, EventRecord>,
  clock: ClockRecord,
  acked: ReadonlyArray<AckStamp> = []
): Changes => ({
  ...none,
  events: changed,
  acked,
  heads: changed.map((event) => headAfter(event, successors.get(successorKey(event)))),
  clock: stored(changed.length > 0, clock)
})

/** Key of the event that follows `event` in its flow (for `settleChanges`' successor map). */
export const successorKey = (event: Pick<EventRecord, "flowId" | "seq">): string =>
  positionKey({ flowId: event.flowId, seq: event.seq + 1 })

/** Key of an event by flow and seq (matches `successorKey` of its predecessor). */
export const positionKey = (event: Pick<EventRecord, "flowId" | "seq">): string => `${event.seq}\u0000${event.flowId}`

/**
 * An event after an operator resets a clock that ran ahead: a backoff or a lease that reaches
 * further than the policy allows from `now` was set by the wrong clock, and ends at `now`. (A
 * lease cut short is safe: a re-claim re-sends, the receiver answers `Duplicate`.)
 */
export const pullIn = (event: EventRecord, now: number, policy: RelayPolicy): EventRecord | undefined => {
  if (event.state === "ready" && event.nextAt > now + policy.backoffCap) return { ...event, nextAt: now }
  if (event.state === "inflight" && event.leaseUntil !== null && event.leaseUntil > now + policy.leaseTicks) {
    return { ...event, leaseUntil: now }
  }
  return undefined
}

/** An acked event as pruning reads it: its identity, state and ack time. */
export interface PruneCandidate {
  readonly eventId: EventId
  readonly flowId: FlowId
  readonly seq: number
  readonly state: EventRecord["state"]
  readonly ackedAt: number | null
  readonly bodyText: string
}

/** What is kept of a pruned event: enough to answer a re-enqueue of its id (`Protocol.reenqueue`). */
export interface DedupRecord {
  readonly eventId: EventId
  readonly flowId: FlowId
  readonly seq: number
  readonly bodyHash: string
  readonly prunedAt: number
}

/**
 * Which of `candidates` retention deletes at `now`: acked events acked at or before `cutoff`, each
 * leaving a dedup record. Anything else (ready, inflight, quarantined, or acked later) is kept;
 * flows are never touched, so seq counters, heads and turns stay as they are.
 */
export const prune = (
  candidates: ReadonlyArray<PruneCandidate>,
  cutoff: number,
  now: number,
  hash: (text: string) => string
): { readonly deleted: ReadonlyArray<EventId>; readonly dedup: ReadonlyArray<DedupRecord> } => {
  const expired = candidates.filter((c) => c.state === "acked" && c.ackedAt !== null && c.ackedAt <= cutoff)
  return {
    deleted: expired.map((c) => c.eventId),
    dedup: expired.map((c) => ({ eventId: c.eventId, flowId: c.flowId, seq: c.seq, bodyHash: hash(c.bodyText), prunedAt: now }))
  }
}
