/**
 * Each queue operation as a pure function from the records it read to the records it writes.
 * A backend reads what an operation asks for, calls it, and writes back the result in the same
 * transaction — SQL (or a map) holds the data, every decision is made here and in `Protocol`.
 */
import { Either } from "effect"
import { GroupConflict } from "./Errors.js"
import type { EnqueueConflict } from "./Errors.js"
import type { EventId, FlowId, GroupId } from "./Ids.js"
import type { CanonicalBody } from "./Json.js"
import type { Claimed, DeliveryReply, EnqueueResult, SettleOutcome } from "./Outcomes.js"
import type { RelayPolicy } from "./Policy.js"
import { isSettledForGood, previousSeqOf } from "./Operator.js"
import * as Protocol from "./Protocol.js"
import type { ClockRecord, EventRecord, FlowRecord, GroupRecord, Token } from "./Records.js"

/** A validated enqueue. */
export interface EnqueueCommand {
  readonly eventId: EventId
  readonly flowId: FlowId
  readonly body: CanonicalBody
  readonly weight?: number | undefined
  /** The flow's group: fixed by the flow's first event, may be left out after it. */
  readonly group?: GroupId | undefined
}

/** A group as enqueue reads it: its record, and whether any of its flows has a head (unacked events). */
export interface StoredGroup extends GroupRecord {
  readonly active: boolean
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
  /** Groups whose turn or weight changed, and new groups. */
  readonly groups: ReadonlyArray<GroupRecord>
  readonly heads: ReadonlyArray<Head>
  /** The clock to store, or undefined when nothing changed. */
  readonly clock: ClockRecord | undefined
}

/**
 * No changes. It has every field, `clock` included: a spread of it followed by a field it lacked
 * would make V8 build a new map on every call.
 */
export const noChanges: Changes = { inserted: [], events: [], acked: [], flows: [], groups: [], heads: [], clock: undefined }

/** The clock after a write: `advanced` (tick = max(tick, now)) when something changed. */
const stored = (changed: boolean, advanced: ClockRecord): ClockRecord | undefined => (changed ? advanced : undefined)

/**
 * Enqueues `commands` in order. `identities` holds what is stored under the commands' ids, `flows`
 * and `groups` the stored rows of their flows and groups. Events of one flow get consecutive seqs;
 * an id already stored (or earlier in the batch) with the same flow and body is `Existing`,
 * otherwise a conflict. A flow's first event fixes its group (a later one naming another is a
 * `GroupConflict`). A group enters the rotation as a flow does (`admit`), when it gets its first
 * unacked event: new, or with none of its flows holding a head — before the flow that brings it.
 * `hash` hashes a body text as a pruned event's dedup record did (see `prune`).
 */
export const enqueue = (
  commands: ReadonlyArray<EnqueueCommand>,
  identities: ReadonlyMap<string, Protocol.StoredIdentity>,
  flows: ReadonlyMap<string, FlowRecord>,
  groups: ReadonlyMap<string, StoredGroup>,
  clock: ClockRecord,
  now: number,
  policy: RelayPolicy,
  hash?: (text: string) => string
): Either.Either<
  { readonly results: ReadonlyArray<EnqueueResult>; readonly changes: Changes },
  EnqueueConflict | GroupConflict
> => {
  const known = new Map(identities)
  const current = new Map(flows)
  const touched = new Set<string>()
  const currentGroups = new Map<string, StoredGroup>(groups)
  const changedGroups = new Map<string, GroupRecord>()
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
    const before = current.get(command.flowId)
    const group = command.group
    // A flow named only by a weight (no event yet) takes the group of its first event.
    if (group !== undefined && before !== undefined && before.seq > 0 && before.group !== group) {
      return Either.left(new GroupConflict({ flowId: command.flowId, storedGroup: before.group, requestedGroup: group }))
    }
    const joins = before === undefined || before.seq === 0 ? group ?? before?.group ?? null : before.group
    if (joins !== null && before?.headSeq == null) {
      const entered = enterGroup(currentGroups.get(joins), joins, policy, after)
      if (entered !== undefined) {
        after = entered.clock
        currentGroups.set(joins, { ...entered.group, active: true })
        changedGroups.set(joins, entered.group)
      }
    }
    const [flow, admitted] = withEvent(before, command, after, now, policy)
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
    changes: {
      ...noChanges,
      inserted,
      flows: [...touched].map((id) => current.get(id)!),
      groups: [...changedGroups.values()],
      clock: stored(changed, after)
    }
  })
}

/**
 * A group a flow with no head joins (new, or drained before): admitted as the flow is when it has
 * no flow with a head (a new group starts at served 0, weight 1), unchanged otherwise (undefined).
 */
const enterGroup = (group: StoredGroup | undefined, groupId: GroupId, policy: RelayPolicy, clock: ClockRecord) => {
  if (group?.active === true) return undefined
  const current = group ?? { groupId, served: 0, weight: 1, burst: 0, active: false }
  const admitted = Protocol.admit(policy, clock, current.served)
  // A group that keeps its place (seed admission) keeps its turn too; a new place starts a new turn.
  const burst = admitted.served === current.served ? current.burst : 0
  return { group: { groupId, served: admitted.served, weight: current.weight, burst }, clock: admitted.clock }
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
      burst: 0,
      group: command.group ?? null
    }, admitted.clock]
  }
  const seq = flow.seq + 1
  let next: FlowRecord = { ...flow, seq, group: flow.group ?? command.group ?? null }
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
    const created: FlowRecord = { flowId, seq: 0, served: 0, headSeq: null, eligibleAt: null, weight, burst: 0, group: null }
    return { ...noChanges, flows: [created], clock }
  }
  const next = { ...flow, ...Protocol.turnWithWeight(flow, weight) }
  return next.weight === flow.weight ? noChanges : { ...noChanges, flows: [next], clock }
}

/**
 * Sets a group's weight; a group named before its first event is created without flows (it enters
 * the rotation with that event). The weight a group already has changes nothing.
 */
export const setGroupWeight = (group: GroupRecord | undefined, groupId: GroupId, weight: number, clock: ClockRecord): Changes => {
  if (group === undefined) return { ...noChanges, groups: [{ groupId, served: 0, weight, burst: 0 }], clock }
  const turn = Protocol.turnWithWeight(group, weight)
  const next: GroupRecord = { groupId, served: turn.served, weight: turn.weight, burst: turn.burst }
  return next.weight === group.weight ? noChanges : { ...noChanges, groups: [next], clock }
}

/** A flow and its head, offered to a claim, with the flow's group (none: a group of its own). */
export interface Candidate {
  readonly flow: FlowRecord
  readonly head: EventRecord
  readonly group?: GroupRecord | undefined
}

/** One claim of a rotation: the candidate, the ticket it takes, and its group's turn after it. */
export interface Turned<C extends Candidate> {
  readonly candidate: C
  readonly ticket: number
  readonly group: GroupRecord | undefined
}

/** A place in the rotation across groups: a group, or a flow of no group. */
interface Unit<C extends Candidate> {
  readonly id: string
  readonly kind: 0 | 1
  group: GroupRecord | undefined
  readonly flows: Array<C>
  taken: number
}

const servedOf = (unit: Unit<Candidate>) => unit.group?.served ?? unit.flows[0]!.flow.served

/** Least `(served, id)` first; a flow of no group before a group of the same id. */
const compareUnits = (a: Unit<Candidate>, b: Unit<Candidate>): number =>
  servedOf(a) - servedOf(b) || Protocol.compareIds(a.id, b.id) || a.kind - b.kind

/**
 * The order in which `limit` single claims take `candidates` (eligible heads, one per flow, in any
 * order), ticket after ticket from `ticket + 1`: claims rotate across groups — a flow of no group
 * is a group of its own — least `(served, id)` first, and inside a group across its flows, least
 * `(served, flowId)` first. Each claim charges its group's turn as it charges its flow's
 * (`turnAfterClaim`): a group of weight w keeps its place for w claims, then moves behind every
 * other. Without groups this is turn order, `limit` deep.
 */
export const rotate = <C extends Candidate>(candidates: ReadonlyArray<C>, limit: number, ticket: number): ReadonlyArray<Turned<C>> => {
  const groups = new Map<string, Unit<C>>()
  const queue: Array<Unit<C>> = []
  for (const candidate of candidates) {
    const { group } = candidate
    if (group === undefined) {
      queue.push({ id: candidate.flow.flowId, kind: 0, group: undefined, flows: [candidate], taken: 0 })
      continue
    }
    const unit = groups.get(group.groupId)
    if (unit !== undefined) unit.flows.push(candidate)
    else {
      const created: Unit<C> = { id: group.groupId, kind: 1, group, flows: [candidate], taken: 0 }
      groups.set(group.groupId, created)
      queue.push(created)
    }
  }
  for (const unit of groups.values()) unit.flows.sort((a, b) => Protocol.compareTurn(a.flow, b.flow))
  queue.sort(compareUnits)
  const turns: Array<Turned<C>> = []
  // A group whose turn ends takes the newest ticket: its place is behind every unit in the queue.
  for (let front = 0; front < queue.length && turns.length < limit;) {
    const unit = queue[front]!
    ticket += 1
    if (unit.group !== undefined) unit.group = { ...unit.group, ...Protocol.turnAfterClaim(unit.group, ticket) }
    turns.push({ candidate: unit.flows[unit.taken]!, ticket, group: unit.group })
    unit.taken += 1
    if (unit.taken === unit.flows.length) front += 1
    else if (unit.group!.served === ticket) {
      front += 1
      queue.push(unit)
    }
  }
  return turns
}

/**
 * Whether `rotate(candidates, limit, …)` takes what it would take from every eligible head, when
 * each group offered only its first `perGroup` flows in turn order: a group that offered
 * `perGroup` may have more, and the rotation would have come back to it for one more if it took
 * all `perGroup` before the claim's last turn. A flow of no group is offered whole. Which turns
 * the rotation takes does not depend on the ticket it starts from, only that it is above every
 * turn offered.
 */
export const rotationComplete = (candidates: ReadonlyArray<Candidate>, limit: number, perGroup: number): boolean => {
  if (perGroup >= limit) return true
  const offered = new Map<string, number>()
  let ticket = 0
  for (const { flow, group } of candidates) {
    ticket = Math.max(ticket, flow.served, group?.served ?? 0)
    if (group !== undefined) offered.set(group.groupId, (offered.get(group.groupId) ?? 0) + 1)
  }
  if (![...offered.values()].includes(perGroup)) return true
  const taken = new Map<string, number>()
  const turns = rotate(candidates, limit, ticket)
  for (let i = 0; i < turns.length; i++) {
    const group = turns[i]!.candidate.group
    if (group === undefined) continue
    const count = (taken.get(group.groupId) ?? 0) + 1
    taken.set(group.groupId, count)
    if (count === perGroup && offered.get(group.groupId) === perGroup && i < limit - 1) return false
  }
  return true
}

/**
 * Claims up to `limit` of `candidates` (eligible heads, one per flow) in `rotate` order, each with
 * its own ticket. Returns undefined if a candidate is not eligible (the backend's cache is
 * inconsistent).
 */
export const claim = (
  candidates: ReadonlyArray<Candidate>,
  clock: ClockRecord,
  now: number,
  policy: RelayPolicy,
  limit: number = candidates.length
): { readonly claims: ReadonlyArray<typeof Claimed.Type>; readonly changes: Changes } | undefined => {
  const claims: Array<typeof Claimed.Type> = []
  const events: Array<EventRecord> = []
  const flows: Array<FlowRecord> = []
  const groups = new Map<string, GroupRecord>()
  const turns = rotate(candidates, limit, clock.ticket)
  for (const { candidate: { flow, head }, group, ticket } of turns) {
    if (head.flowId !== flow.flowId || head.seq !== flow.headSeq || !Protocol.isEligible(head, now)) return undefined
    const claimed = Protocol.claimEvent(head, now, policy)
    const turn = Protocol.turnAfterClaim(flow, ticket)
    events.push(claimed)
    flows.push({ ...flow, served: turn.served, burst: turn.burst, eligibleAt: Protocol.eligibleAt(claimed) })
    if (group !== undefined) groups.set(group.groupId, group)
    const token = { eventId: claimed.eventId, generation: claimed.generation }
    const previousSeq = previousSeqOf(flow, head)
    claims.push(
      previousSeq === undefined
        ? { _tag: "Claimed", token, event: claimed, leaseUntil: claimed.leaseUntil! }
        : { _tag: "Claimed", token, event: claimed, leaseUntil: claimed.leaseUntil!, previousSeq }
    )
  }
  const ticket = clock.ticket + turns.length
  return {
    claims,
    changes: { ...noChanges, events, flows, groups: [...groups.values()], clock: stored(claims.length > 0, { ...clock, ticket }) }
  }
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
 * The flow's cached head after `event` (its head) changed: the event itself while it is neither
 * acked nor discarded, else `next` (the flow's event at seq + 1, if any).
 */
export const headAfter = (event: EventRecord, next: EventRecord | undefined): Head =>
  !isSettledForGood(event.state)
    ? { flowId: event.flowId, headSeq: event.seq, eligibleAt: Protocol.eligibleAt(event) }
    : { flowId: event.flowId, headSeq: next?.seq ?? null, eligibleAt: next === undefined ? null : Protocol.eligibleAt(next) }

/** The changes of a settle: the changed events, their flows' heads, and the clock if anything changed. */
export const settleChanges = (
  changed: ReadonlyArray<EventRecord>,
  successors: ReadonlyMap<string, EventRecord>,
  clock: ClockRecord,
  acked: ReadonlyArray<AckStamp> = []
): Changes => ({
  ...noChanges,
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
 * Which of `candidates` retention deletes at `now`: acked (or discarded) events acked (discarded)
 * at or before `cutoff`, each leaving a dedup record. Anything else (ready, inflight, quarantined,
 * or acked later) is kept;
 * flows are never touched, so seq counters, heads and turns stay as they are.
 */
export const prune = (
  candidates: ReadonlyArray<PruneCandidate>,
  cutoff: number,
  now: number,
  hash: (text: string) => string
): { readonly deleted: ReadonlyArray<EventId>; readonly dedup: ReadonlyArray<DedupRecord> } => {
  const expired = candidates.filter((c) => isSettledForGood(c.state) && c.ackedAt !== null && c.ackedAt <= cutoff)
  return {
    deleted: expired.map((c) => c.eventId),
    dedup: expired.map((c) => ({ eventId: c.eventId, flowId: c.flowId, seq: c.seq, bodyHash: hash(c.bodyText), prunedAt: now }))
  }
}
