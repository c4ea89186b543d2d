/**
 * What a storage backend gives the queue: records in, records out, inside transactions. `RelayQueue.make`
 * reads through it, decides with `Operations`, and writes back through it, so every backend
 * behaves the same. A backend may also run the hot operations whole (`operations`), deciding them
 * as `Operations` and `Protocol` specify — PostgreSQL does, in server functions, one round trip
 * each; the contract suite and the model test hold it to the same outcomes.
 */
import type { SqlError } from "@effect/sql/SqlError"
import type { Effect } from "effect"
import type { EventId, FlowId, GroupId } from "../domain/Ids.js"
import type { ClockRegressed, EnqueueConflict, GroupConflict } from "../domain/Errors.js"
import type { AckStamp, Candidate, DedupRecord, EnqueueCommand, Head, NewEvent, PruneCandidate, StoredGroup } from "../domain/Operations.js"
import type { Claimed, EnqueueResult, SettleOutcome } from "../domain/Outcomes.js"
import type { Quarantined } from "../domain/Notable.js"
import type { RedriveFilter } from "../domain/Operator.js"
import type { ProtocolSettings, RelayPolicy, StoredRetention } from "../domain/Policy.js"
import type { StoredIdentity, Verdict } from "../domain/Protocol.js"
import type { AuditRecord, ClockRecord, EventRecord, EventState, FlowRecord, GroupRecord, Resume, Token } from "../domain/Records.js"

/** A flow's event by position. */
export interface Position {
  readonly flowId: FlowId
  readonly seq: number
}

/** What an operator listing asks for (validated). */
export interface EventQuery {
  readonly state?: EventState | undefined
  readonly flowId?: FlowId | undefined
  readonly afterEventId?: EventId | undefined
  /** With `flowId`: list the flow's events after this seq (the flow's events are in seq order). */
  readonly afterSeq?: number | undefined
  readonly limit: number
}

/** A page of flows: by id, or in turn order (ascending `(served, flowId)`); of one group, or of all. */
export type FlowQuery =
  & (
    | { readonly order: "id"; readonly after?: FlowId | undefined; readonly limit: number }
    | {
      readonly order: "turn"
      readonly after?: { readonly served: number; readonly flowId: FlowId } | undefined
      readonly limit: number
    }
  )
  & { readonly group?: GroupId | undefined }

/** A page of groups, by id. */
export interface GroupQuery {
  readonly after?: GroupId | undefined
  readonly limit: number
}

/** A group as operators see it: its turn, how many flows it has, how many of them have a head, and whether it is paused. */
export interface GroupView extends GroupRecord {
  /** How many flows it has. */
  readonly flows: number
  /** How many of them have a head. */
  readonly waiting: number
  /** Whether it is paused. */
  readonly paused: boolean
}

/** A flow as operators see it: its record, and whether it is paused (its own pause; its group's shows on the group). */
export interface FlowView extends FlowRecord {
  /** Whether the flow itself is paused. */
  readonly paused: boolean
}

/** A store's protocol settings, the retention an operator set (absent: none yet), and their version. */
export interface StoredProtocol {
  readonly settings: ProtocolSettings
  readonly retention?: StoredRetention | undefined
  readonly version: number
}

/** What a pause or resume names: one flow, or one group (every flow of it). */
export type PauseTarget = { readonly flowId: FlowId } | { readonly group: GroupId }

/** Reads inside a transaction. */
export interface QueueReads {
  /**
   * Optional: the time to reckon with, from the store (the database server's clock), for many
   * hosts sharing one time line. Without it the caller's `Clock` is used.
   */
  readonly now?: Effect.Effect<number, SqlError> | undefined
  readonly clock: Effect.Effect<ClockRecord, SqlError>
  /** The least `eligibleAt` of all flows neither paused nor in a paused group (when the next head becomes claimable), if any. */
  readonly wakeAt: Effect.Effect<number | null, SqlError>
  /**
   * Up to `limit` flows whose head is eligible at `now`, in turn order, with their heads; when no
   * head is eligible, none, found without walking the flows that wait (an idle claim stays cheap).
   */
  readonly candidates: (now: number, limit: number) => Effect.Effect<ReadonlyArray<Candidate>, SqlError>
  readonly events: (ids: ReadonlyArray<EventId>) => Effect.Effect<ReadonlyArray<EventRecord>, SqlError>
  /** Id, flow, seq and body text of the stored events among `ids`, and the dedup records of pruned ones. */
  readonly identities: (
    ids: ReadonlyArray<EventId>
  ) => Effect.Effect<ReadonlyArray<StoredIdentity & { readonly eventId: EventId }>, SqlError>
  readonly eventsAt: (positions: ReadonlyArray<Position>) => Effect.Effect<ReadonlyArray<EventRecord>, SqlError>
  /**
   * Optional: `events(ids)` and, in the same read, the event after each of them in its flow, so a
   * settle needs no second read for the heads that follow its acked events. Only for a store whose
   * reads in a write see everything committed before the transaction's lock (a store-wide write
   * lock): no other writer can then append to those flows before the transaction ends.
   */
  readonly eventsWithNext?:
    | ((
      ids: ReadonlyArray<EventId>
    ) => Effect.Effect<{ readonly events: ReadonlyArray<EventRecord>; readonly next: ReadonlyArray<EventRecord> }, SqlError>)
    | undefined
  readonly flows: (ids: ReadonlyArray<FlowId>) => Effect.Effect<ReadonlyArray<FlowRecord>, SqlError>
  /** The named groups, each saying whether any of its flows has a head. */
  readonly groups: (ids: ReadonlyArray<GroupId>) => Effect.Effect<ReadonlyArray<StoredGroup>, SqlError>
  /** Ready events due after `nextAtAfter` and inflight ones leased beyond `leaseAfter`. */
  readonly reachingBeyond: (nextAtAfter: number, leaseAfter: number) => Effect.Effect<ReadonlyArray<EventRecord>, SqlError>
  readonly listEvents: (query: EventQuery) => Effect.Effect<ReadonlyArray<EventRecord>, SqlError>
  readonly listFlows: (query: FlowQuery) => Effect.Effect<ReadonlyArray<FlowView>, SqlError>
  readonly listGroups: (query: GroupQuery) => Effect.Effect<ReadonlyArray<GroupView>, SqlError>
  readonly listAudit: (query: { readonly eventId?: EventId | undefined; readonly limit?: number | undefined }) => Effect.Effect<
    ReadonlyArray<AuditRecord>,
    SqlError
  >
  /** Every flow and group (by id), event (by flow and seq) and audit row (in order): the whole store. */
  readonly dump: Effect.Effect<
    {
      readonly flows: ReadonlyArray<FlowRecord>
      readonly groups: ReadonlyArray<GroupRecord>
      readonly events: ReadonlyArray<EventRecord>
      readonly audit: ReadonlyArray<AuditRecord>
    },
    SqlError
  >
  /** Events per state, and the claims the stored events took (the sum of their lifetime attempts). */
  readonly countByState: Effect.Effect<{ readonly byState: Readonly<Record<EventState, number>>; readonly claims: number }, SqlError>
  /**
   * Up to `limit` quarantined heads matching `filter` (`Operator.matchesRedriveFilter`) with ids
   * after `after`, in event-id order, each with its flow's group.
   */
  readonly quarantinedHeads: (
    filter: RedriveFilter,
    after: EventId | undefined,
    limit: number
  ) => Effect.Effect<ReadonlyArray<{ readonly event: EventRecord; readonly group: GroupId | null }>, SqlError>
  /**
   * Optional: the protocol settings the store keeps and their version (which every change moves
   * on); undefined where the store keeps none. Absent: the store's policy never changes.
   */
  readonly protocol?: Effect.Effect<StoredProtocol | undefined, SqlError> | undefined
  /** How many flows and groups are paused. */
  readonly countPaused: Effect.Effect<{ readonly flows: number; readonly groups: number }, SqlError>
  /** Number of heads eligible at `now` (a paused one is not), and the least `eligibleAt` among them. */
  readonly eligibleHeads: (now: number) => Effect.Effect<{ readonly count: number; readonly oldest: number | null }, SqlError>
  /** Up to `limit` acked events acked at or before `cutoff`, oldest ack first. */
  readonly pruneCandidates: (cutoff: number, limit: number) => Effect.Effect<ReadonlyArray<PruneCandidate>, SqlError>
  /** How many acked events and dedup records are due at the cutoffs (null: none), each counted up to `limit`. */
  readonly countPrunable: (
    eventCutoff: number | null,
    dedupCutoff: number | null,
    limit: number
  ) => Effect.Effect<{ readonly events: number; readonly dedup: number }, SqlError>
}

/** Writes inside a write transaction (which holds the store's write lock from its start). */
export interface QueueWrites extends QueueReads {
  /**
   * Optional: makes this transaction the store's only writer until it ends, on a backend whose
   * writes otherwise run side by side (whole-store writes such as a clock reset call it first).
   */
  readonly lockStore?: Effect.Effect<void, SqlError> | undefined
  readonly setClock: (clock: ClockRecord) => Effect.Effect<void, SqlError>
  readonly insertEvents: (events: ReadonlyArray<NewEvent>) => Effect.Effect<void, SqlError>
  /** Stores the mutable fields of existing events (state, times, generation, attempts, reason) and ack times. */
  readonly updateEvents: (events: ReadonlyArray<EventRecord>, acked?: ReadonlyArray<AckStamp>) => Effect.Effect<void, SqlError>
  /** Inserts or replaces whole group rows (before the flows that join them are put). */
  readonly putGroups: (groups: ReadonlyArray<GroupRecord>) => Effect.Effect<void, SqlError>
  /** Inserts or replaces whole flow rows, all but their `resume` (kept as stored: `setResume` alone writes it). */
  readonly putFlows: (flows: ReadonlyArray<FlowRecord>) => Effect.Effect<void, SqlError>
  /** Stores where a flow resumes after the run of discarded events its head just joined (a discard's write). */
  readonly setResume: (flowId: FlowId, resume: Resume) => Effect.Effect<void, SqlError>
  /**
   * Stores flows' cached heads, and the `eligible_at` of their groups. `ungrouped`: the caller
   * read these flows in this transaction and none is in a group (a flow's group is fixed by its
   * first event), so no group changes with them.
   */
  readonly setHeads: (heads: ReadonlyArray<Head>, ungrouped?: boolean) => Effect.Effect<void, SqlError>
  readonly appendAudit: (record: AuditRecord) => Effect.Effect<void, SqlError>
  /**
   * Pauses (or resumes) a flow or a group, refreshing what the claim's walk reads of its group;
   * answers whether it was paused before, or undefined when the store has no such flow or group
   * (nothing is created). A paused flow, and every flow of a paused group, is passed over by
   * claims (`candidates`, `wakeAt`, `eligibleHeads`) and keeps its turn.
   */
  readonly setPaused: (target: PauseTarget, paused: boolean) => Effect.Effect<boolean | undefined, SqlError>
  /** Optional (with `protocol`): stores the protocol settings under a new version. */
  readonly setProtocol?: ((protocol: StoredProtocol) => Effect.Effect<void, SqlError>) | undefined
  /** Stores dedup records of pruned events (replacing an older record of the same id). */
  readonly putDedup: (records: ReadonlyArray<DedupRecord>) => Effect.Effect<void, SqlError>
  /** Deletes the named events if they are acked (never any other state); returns how many. */
  readonly deleteAcked: (ids: ReadonlyArray<EventId>) => Effect.Effect<number, SqlError>
  /** Deletes up to `limit` dedup records pruned at or before `cutoff`; returns how many. */
  readonly deleteDedup: (cutoff: number, limit: number) => Effect.Effect<number, SqlError>
}

/** A reply to settle as a backend's `step` takes it: the claim's token, the reply's verdict (its reason bounded), the draw of full jitter. */
export interface SettleItem {
  readonly token: Token
  readonly verdict: Verdict
  readonly draw: number
}

/** An event a settle quarantined, with its flow's group (null: none, or not known to the backend), as it is told. */
export type QuarantinedHead = typeof Quarantined.Type

/** What a backend's `step` did. */
export interface Stepped {
  /** One outcome per settle, in order. */
  readonly outcomes: ReadonlyArray<SettleOutcome>
  readonly quarantined: ReadonlyArray<QuarantinedHead>
  readonly claims: ReadonlyArray<typeof Claimed.Type>
  /** The group of each claimed flow that has one. */
  readonly groups: ReadonlyArray<string>
  /** With no claim: the least `eligibleAt` of the flows a claim may take (null: none). */
  readonly wakeAt: number | null
  /** The time the step reckoned with. */
  readonly now: number
  /** Whether that time was behind the stored tick (the clamp mode's regression). */
  readonly clamped: boolean
}

/**
 * The hot operations as whole operations, on a backend that decides them itself (PostgreSQL's
 * server functions) as `Operations` and `Protocol` specify: one call each. Every other backend
 * leaves them to the queue, which reads, decides and writes through `QueueWrites`.
 */
export interface Operations {
  /**
   * Settles `items` in order, then claims up to `limit` heads in turn order, in one transaction
   * at one time; `beforeCommit` (fault points) runs last inside it.
   */
  readonly step: (
    items: ReadonlyArray<SettleItem>,
    limit: number,
    policy: RelayPolicy,
    beforeCommit?: Effect.Effect<void>
  ) => Effect.Effect<Stepped, ClockRegressed | SqlError>
  /** Enqueues `commands` in order (inside the caller's transaction where the backend shares the application's database). */
  readonly enqueue: (
    commands: ReadonlyArray<EnqueueCommand>,
    policy: RelayPolicy
  ) => Effect.Effect<
    { readonly results: ReadonlyArray<EnqueueResult>; readonly clamped: boolean },
    EnqueueConflict | GroupConflict | ClockRegressed | SqlError
  >
}

/** A queue store. */
export interface QueueBackend {
  /**
   * Runs `body` in a transaction holding the write lock from its start. `beforeCommit` runs last
   * inside it, outside any ambient transaction of the caller's (fault points use it).
   */
  readonly write: <A, E>(
    body: (tx: QueueWrites) => Effect.Effect<A, E>,
    beforeCommit?: Effect.Effect<void>
  ) => Effect.Effect<A, E | SqlError>
  /** Runs `body` in a transaction that sees one consistent state. */
  readonly read: <A, E>(body: (tx: QueueReads) => Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError>
  /**
   * Optional: like `write`, inside the caller's own transaction when there is one — what enqueue
   * uses on a store that shares the application's database (a transactional outbox).
   */
  readonly join?: (<A, E>(body: (tx: QueueWrites) => Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError>) | undefined
  /** Optional: the hot operations, whole (see `Operations`). */
  readonly operations?: Operations | undefined
}
