/**
 * The queue contract: enqueue, claim, settle, redrive and inspect, and what each takes and
 * answers. One implementation (`make`, in `internal/relayQueue.ts`) serves every backend: it
 * checks the input (`QueueInput`), reads and writes through a `QueueBackend`, and decides with the
 * domain's `Operations`.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Context } from "effect"
import type { Duration, Effect, Queue, Scope, Stream } from "effect"
import type { ClockRegressed, EnqueueConflict, EventNotFound, GroupConflict, InvalidInput, RedriveError, TargetNotFound } from "../domain/Errors.js"
import type { Claimed, ClaimOutcome, DeliveryReply, Discarded, EnqueueResult, Redriven, SettleOutcome } from "../domain/Outcomes.js"
import type { NotableChange } from "../domain/Notable.js"
import type { PolicyKey, RelayPolicy } from "../domain/Policy.js"
import type { AuditRecord, ClockRecord, EventRecord, EventState, Snapshot } from "../domain/Records.js"
import type { FlowView, GroupView } from "./QueueBackend.js"
import type * as Retention from "./Retention.js"

export { MaxBatchSize, MaxWeight } from "./QueueInput.js"
export { make } from "./internal/relayQueue.js"

/** A new event as a caller writes it. */
export interface EnqueueInput {
  /** The event's id, unique in the store: an enqueue of it again is `Existing` or `EnqueueConflict`. */
  readonly eventId: string
  /** The flow the event is delivered in, in enqueue order. */
  readonly flowId: string
  /** The event's body: plain JSON, compared canonically. */
  readonly body: unknown
  /** Sets the flow's weight (integer ≥ 1; a new flow defaults to 1). */
  readonly weight?: number | undefined
  /**
   * The flow's group (a tenant): claims rotate across groups, then across the group's flows. The
   * flow's first event fixes it; later events may leave it out. No group: a group of its own.
   */
  readonly group?: string | undefined
}

/** A group's weight as a caller sets it. */
export interface GroupWeightInput {
  /** The group. */
  readonly groupId: string
  /** Claims in a row the group keeps its place for (integer ≥ 1). */
  readonly weight: number
}

/** Which groups `groups` lists (by group id, a page at a time). */
export interface GroupFilter {
  /** List groups whose id sorts after this one (the last id of the previous page). */
  readonly after?: string | undefined
  /** At most this many (default 100, at most 10000). */
  readonly limit?: number | undefined
}

export type { FlowView, GroupView } from "./QueueBackend.js"

/** A flow's weight as a caller sets it. */
export interface FlowWeightInput {
  /** The flow. */
  readonly flowId: string
  /** Claims in a row the flow keeps its place for (integer ≥ 1). */
  readonly weight: number
}

/** A claim token as a caller passes it back. */
export interface TokenInput {
  /** The claimed event. */
  readonly eventId: string
  /** The generation its claim took: a settle of an older one is `Stale`. */
  readonly generation: number
}

/** One item of `settleBatch`. */
export interface SettleInput {
  /** The claim being settled. */
  readonly token: TokenInput
  /** What the receiver answered. */
  readonly reply: DeliveryReply
}

/** An operator's redrive as a caller writes it. */
export interface RedriveInput {
  /** The quarantined head to release. */
  readonly eventId: string
  /** The generation the operator saw: another one is `GenerationMismatch`, nothing changed. */
  readonly expectedGeneration: number
  /** Why (required, recorded in the audit row). */
  readonly reason: string
  /** Who decides (recorded in the audit row with the reason). */
  readonly actor?: string | undefined
}

/**
 * An operator's discard as a caller writes it: the quarantined head at the generation the operator
 * saw leaves its flow for good, with an audited reason.
 */
export interface DiscardInput {
  /** The quarantined head to discard. */
  readonly eventId: string
  /** The generation the operator saw: another one is `GenerationMismatch`, nothing changed. */
  readonly expectedGeneration: number
  /** Why (required, recorded in the audit row). */
  readonly reason: string
  /** Who decides (recorded in the audit row with the reason). */
  readonly actor?: string | undefined
}

/**
 * An operator's pause (or resume) of one flow or one group (every flow of it), with an audited
 * reason. A paused flow's head is not claimed (a delivery already in flight finishes and settles as
 * usual); it keeps its place in the rotation, and resumes from it.
 */
export type PauseInput =
  & ({ readonly flowId: string; readonly group?: undefined } | { readonly group: string; readonly flowId?: undefined })
  & { readonly reason: string; readonly actor?: string | undefined }

/** What a pause or resume did: the flow or group, and whether it changed (pausing a paused one changes nothing). */
export interface PauseResult {
  readonly _tag: "Paused" | "Resumed"
  /** The flow or group paused or resumed. */
  readonly target: { readonly kind: "flow" | "group"; readonly id: string }
  /** Whether its state changed (false: it already was). */
  readonly changed: boolean
}

/** Which quarantined heads `redriveAll` releases: every field given must match (at least one, or `all`). */
export interface RedriveFilterInput {
  /** Heads of this group's flows. */
  readonly group?: string | undefined
  /** The head of this flow. */
  readonly flowId?: string | undefined
  /** Flows whose id starts with this text. */
  readonly flowPrefix?: string | undefined
  /** Heads whose reason contains this text. */
  readonly reasonContains?: string | undefined
  /** Quarantined at or before this tick (a quarantined head's `nextAt` says when it was quarantined). */
  readonly quarantinedBefore?: number | undefined
  /** Quarantined at or after this tick. */
  readonly quarantinedAfter?: number | undefined
  /** Every quarantined head (no other field needed). */
  readonly all?: boolean | undefined
}

/** A bulk redrive as a caller writes it. */
export interface RedriveAllInput {
  /** Which quarantined heads. */
  readonly filter: RedriveFilterInput
  /** One reason for every head (recorded in each head's audit row). */
  readonly reason: string
  /** Who decides (recorded in each audit row). */
  readonly actor?: string | undefined
  /** Only list what would be redriven; write nothing. */
  readonly dryRun?: boolean | undefined
  /** Heads per transaction (default `Operator.RedrivePageSize`, at most 1000). */
  readonly pageSize?: number | undefined
  /** Told of each page once it committed (a dry run: once it was read). */
  readonly onPage?: ((page: ReadonlyArray<RedrivenHead>) => Effect.Effect<void>) | undefined
}

/** One head of a bulk redrive: its generation after it (a dry run: now). */
export interface RedrivenHead {
  /** The head's event. */
  readonly eventId: string
  /** Its flow. */
  readonly flowId: string
  /** Its flow's group (null: none). */
  readonly group: string | null
  /** Why it was quarantined. */
  readonly reason: string | null
  /** Its generation after the redrive (a dry run: now). */
  readonly generation: number
}

/** What a bulk redrive did (or, dry, would do). */
export interface RedriveAllResult {
  /** Whether nothing was written. */
  readonly dryRun: boolean
  /** The heads redriven (a dry run: that would be). */
  readonly heads: ReadonlyArray<RedrivenHead>
  /** Heads that matched when read but had moved on when their page was written (not redriven). */
  readonly skipped: number
  /** Transactions it took (a dry run: pages read). */
  readonly pages: number
}

/** An operator's change of a live store's protocol settings. */
export interface SetPolicyInput {
  /** New protocol settings (those left out are kept). */
  readonly policy?: {
    readonly leaseTicks?: Duration.DurationInput | undefined
    readonly retryBudget?: number | undefined
    readonly backoffBase?: Duration.DurationInput | undefined
    readonly backoffCap?: Duration.DurationInput | undefined
  } | undefined
  /**
   * New retention windows (`null` = keep forever); the store keeps them, and every process's
   * `prune` then prunes by the store's retention instead of its layer's.
   */
  readonly retention?: Retention.RetentionInput | undefined
  /** Why (required, recorded in the audit row). */
  readonly reason: string
  /** Who decides (recorded in the audit row). */
  readonly actor?: string | undefined
}

/** What `setPolicy` did: the settings that changed (none: the store already ran them), and the policy and retention now run. */
export interface PolicyChange {
  /** The settings that changed (empty: the store already ran them). */
  readonly changed: ReadonlyArray<PolicyKey>
  /** The policy now run. */
  readonly policy: RelayPolicy
  /** The retention now run. */
  readonly retention: Retention.Retention
  /** The version of the store's settings after the change. */
  readonly version: number
}

/** Counts for monitoring: events by state, eligible heads, and how long the oldest has waited. */
export interface QueueStats {
  /** Events by state. */
  readonly byState: Readonly<Record<EventState, number>>
  /**
   * Claims the stored events have taken (the sum of their lifetime attempts): it grows by one per
   * claim — not per ticket, which a tail admission takes too — and drops when a prune deletes
   * acked events.
   */
  readonly claims: number
  /** Heads a claim could take now. */
  readonly eligibleHeads: number
  /** How long the oldest eligible head has waited (0: none). */
  readonly oldestEligibleAgeMillis: number
  /** How many flows and groups are paused (their heads are not counted eligible). */
  readonly paused: { readonly flows: number; readonly groups: number }
  /** The store's persisted clock (tick and ticket). */
  readonly clock: ClockRecord
}

/**
 * Which events `events` lists, a page at a time: one flow's in seq order (paged by `afterSeq`),
 * otherwise in event-id order (paged by `afterEventId`).
 */
export interface EventFilter {
  /** Only events in this state. */
  readonly state?: EventState | undefined
  /** Only this flow's events, in seq order. */
  readonly flowId?: string | undefined
  /** Without `flowId`: list events whose id sorts after this one (the last id of the previous page). */
  readonly afterEventId?: string | undefined
  /** With `flowId`: list the flow's events after this seq (the last seq of the previous page). */
  readonly afterSeq?: number | undefined
  /** At most this many (default 100, at most 10000). */
  readonly limit?: number | undefined
}

/**
 * A page of flows: in id order (default; `after` = the last flow id of the previous page), or in
 * turn order (`order: "turn"`, ascending `(served, flowId)`: who is offered the next claim first;
 * the cursor is the last row's `served` and flow id).
 */
export interface PageFilter {
  /** `"id"` (default) or `"turn"`: who is offered the next claim first. */
  readonly order?: "id" | "turn" | undefined
  /** The last flow id of the previous page. */
  readonly after?: string | undefined
  /** In turn order: the last row's `served` on the previous page. */
  readonly afterServed?: number | undefined
  /** Only the flows of this group. */
  readonly group?: string | undefined
  /** At most this many (default 100, at most 10000). */
  readonly limit?: number | undefined
}

/** An operator's request to put a store's clock back to the current time. */
export interface ResetClockInput {
  /** Why (required, recorded in the audit row). */
  readonly reason: string
  /** Who decides (recorded in the audit row). */
  readonly actor?: string | undefined
}

/** What a clock reset did. */
export interface ClockReset {
  /** The persisted tick before and after. */
  readonly before: number
  /** The persisted tick after (now). */
  readonly after: number
  /** Events whose backoff or lease reached further than the policy allows, now due at once. */
  readonly eventsAdjusted: number
}

/** A batch of claims, and when idle, the earliest time a head becomes eligible. */
export interface ClaimBatch {
  /** The heads claimed. */
  readonly claims: ReadonlyArray<typeof Claimed.Type>
  /** With no claim: when the earliest head becomes eligible (none waiting: undefined). */
  readonly wakeAt?: number | undefined
}

/** What `settleAndClaim` did: one outcome per reply, then the claims (and when idle, when to look again). */
export interface SettledAndClaimed extends ClaimBatch {
  /** One outcome per settle, in order. */
  readonly outcomes: ReadonlyArray<SettleOutcome>
}

/** Which audit rows `audit` lists. */
export interface AuditFilter {
  /** Only this event's audit rows. */
  readonly eventId?: string | undefined
  /** At most this many, oldest first (default 100). */
  readonly limit?: number | undefined
}

/** The queue operations. Every write runs in one transaction holding the write lock from its start. */
export interface RelayQueueService {
  /**
   * The policy this queue runs: the one it was opened with, and, once the store's protocol
   * settings change (`setPolicy`, here or in another process), those settings as `refreshPolicy`
   * last adopted them.
   */
  readonly policy: RelayPolicy
  /**
   * Reads the store's protocol settings and retention and adopts them if they changed since this
   * instance last read them (a cheap read of one row). `Relay.run` calls it every `policyInterval`.
   */
  readonly refreshPolicy: Effect.Effect<RelayPolicy, SqlError>
  /**
   * Changes the store's protocol settings (lease, retry budget, backoff) or retention on a live
   * store, with an audited reason: this instance adopts them at once, every other process at its
   * next `refreshPolicy` (or `prune`). A claim already made keeps its lease; a retry already
   * scheduled keeps its time.
   */
  readonly setPolicy: (input: SetPolicyInput) => Effect.Effect<PolicyChange, ClockRegressed | InvalidInput | SqlError>
  /** Stores a new event at the next seq of its flow, or recognises one already stored. */
  readonly enqueue: (
    input: EnqueueInput
  ) => Effect.Effect<EnqueueResult, EnqueueConflict | GroupConflict | ClockRegressed | InvalidInput | SqlError>
  /**
   * Enqueues many events in one transaction, in order (events of one flow get consecutive seqs).
   * All or nothing: one conflict or invalid item refuses the whole batch.
   */
  readonly enqueueBatch: (
    inputs: ReadonlyArray<EnqueueInput>
  ) => Effect.Effect<ReadonlyArray<EnqueueResult>, EnqueueConflict | GroupConflict | ClockRegressed | InvalidInput | SqlError>
  /**
   * Sets a flow's weight: over a round it gets `weight` opportunities for each one of a weight-1
   * flow. Creates the flow (without events) if it does not exist yet.
   */
  readonly setFlowWeight: (input: FlowWeightInput) => Effect.Effect<void, ClockRegressed | InvalidInput | SqlError>
  /**
   * Sets a group's weight: over a round it gets `weight` claims for each one of a weight-1 group
   * (a flow of no group counts as a weight-1 group unless its own weight says otherwise).
   * Creates the group if it does not exist yet.
   */
  readonly setGroupWeight: (input: GroupWeightInput) => Effect.Effect<void, ClockRegressed | InvalidInput | SqlError>
  /**
   * Claims the next eligible head in rotation order (`Operations.rotate`): the group with the
   * smallest `(served, id)` among those with an eligible head (a flow of no group is a group of
   * its own), then that group's flow with the smallest `(served, flowId)`. Or reports `Idle`.
   */
  readonly claim: Effect.Effect<ClaimOutcome, ClockRegressed | SqlError>
  /**
   * Claims up to `limit` eligible heads in one transaction, at most one per flow, in the order
   * `limit` single claims would take them (each takes its own ticket). Empty when idle.
   */
  readonly claimBatch: (limit: number) => Effect.Effect<ReadonlyArray<typeof Claimed.Type>, ClockRegressed | InvalidInput | SqlError>
  /** `claimBatch`, also saying when the next head becomes eligible if nothing was (for workers). */
  readonly claimUpTo: (limit: number) => Effect.Effect<ClaimBatch, ClockRegressed | InvalidInput | SqlError>
  /** Records a receiver's reply for a claim. */
  readonly settle: (
    token: TokenInput,
    reply: DeliveryReply
  ) => Effect.Effect<SettleOutcome, ClockRegressed | InvalidInput | SqlError>
  /** Records many replies in one transaction, one outcome per item, in order. */
  readonly settleBatch: (
    items: ReadonlyArray<SettleInput>
  ) => Effect.Effect<ReadonlyArray<SettleOutcome>, ClockRegressed | InvalidInput | SqlError>
  /**
   * `settleBatch(items)` and then `claimUpTo(limit)` in one transaction: the same outcomes as the
   * two calls one right after the other, for one commit instead of two. What a worker that goes
   * on working sends; `limit` 0 only settles, no items only claims.
   */
  readonly settleAndClaim: (
    items: ReadonlyArray<SettleInput>,
    limit: number
  ) => Effect.Effect<SettledAndClaimed, ClockRegressed | InvalidInput | SqlError>
  /** Releases a quarantined head under a new generation, with an audited reason. */
  readonly redrive: (input: RedriveInput) => Effect.Effect<Redriven, RedriveError | ClockRegressed | InvalidInput | SqlError>
  /**
   * Redrives every quarantined head matching a filter, with one reason, in transactions of
   * `pageSize` heads (one audit row each): a process that dies leaves whole pages done, and running
   * it again redrives the rest — a redriven head is no longer quarantined, and each head is
   * redriven only at the generation its page read. A dry run lists the heads and writes nothing.
   * A head quarantined again after its redrive matches again: bound a re-run with
   * `quarantinedBefore` to leave those alone.
   */
  readonly redriveAll: (input: RedriveAllInput) => Effect.Effect<RedriveAllResult, ClockRegressed | InvalidInput | SqlError>
  /**
   * Takes a quarantined head out of its flow for good, with an audited reason: it becomes
   * `discarded` (never delivered; kept for the audit until retention prunes it as it prunes acked
   * events) and the flow's next event becomes its head. Only ever an operator's decision: the relay
   * never skips a head. The same guards as `redrive` (`NotQuarantined`, `GenerationMismatch`, …).
   */
  readonly discard: (input: DiscardInput) => Effect.Effect<Discarded, RedriveError | ClockRegressed | InvalidInput | SqlError>
  /**
   * Pauses a flow or a group: claims pass over its heads (those in flight finish and settle as
   * usual) until `resume`; it keeps its turn, and the other flows and groups rotate as before.
   * Audited. `TargetNotFound` for a flow or group the store does not have.
   */
  readonly pause: (input: PauseInput) => Effect.Effect<PauseResult, TargetNotFound | ClockRegressed | InvalidInput | SqlError>
  /** Resumes a paused flow or group: its heads are claimed again, from the place in the rotation it kept. Audited. */
  readonly resume: (input: PauseInput) => Effect.Effect<PauseResult, TargetNotFound | ClockRegressed | InvalidInput | SqlError>
  /** The whole store, read in one transaction (for tests and small stores; see `stats`). */
  readonly snapshot: Effect.Effect<Snapshot, SqlError>
  /** Events matching `filter` (for operators): one flow's in seq order, paged by `afterSeq`; else in event-id order, paged by `afterEventId`. */
  readonly events: (filter?: EventFilter) => Effect.Effect<ReadonlyArray<EventRecord>, InvalidInput | SqlError>
  /** Flows in flow-id order, a page at a time. */
  readonly flows: (filter?: PageFilter) => Effect.Effect<ReadonlyArray<FlowView>, InvalidInput | SqlError>
  /** Groups in group-id order, a page at a time, with their flow counts. */
  readonly groups: (filter?: GroupFilter) => Effect.Effect<ReadonlyArray<GroupView>, InvalidInput | SqlError>
  /** One event with its audit rows. */
  readonly inspect: (
    eventId: string
  ) => Effect.Effect<{ readonly event: EventRecord; readonly audit: ReadonlyArray<AuditRecord> }, EventNotFound | InvalidInput | SqlError>
  /** Redrive decisions in the order they were made. */
  readonly audit: (filter?: AuditFilter) => Effect.Effect<ReadonlyArray<AuditRecord>, InvalidInput | SqlError>
  /** Monitoring counts, read in one transaction (counting by state scans the event table). */
  readonly stats: Effect.Effect<QueueStats, SqlError>
  /**
   * Recovery after a process with a clock far ahead wrote to the store: sets the persisted tick
   * to the current time and makes every backoff or lease that reaches further than the policy
   * allows from now end now (a cut lease re-sends; the receiver answers `Duplicate`).
   */
  readonly resetClock: (input: ResetClockInput) => Effect.Effect<ClockReset, InvalidInput | SqlError>
  /** Completes when this queue instance gets new work (enqueue, redrive, an ack); for sleeping workers. */
  readonly awaitWork: Effect.Effect<void>
  /**
   * `awaitWork` that starts watching now: the effect it returns completes once work arrived after
   * this call, at once if some already has. A worker watches before its claim and waits after an
   * idle one, so work that arrives in between does not wait for the poll interval.
   */
  readonly watchWork: Effect.Effect<Effect.Effect<void>>
  /**
   * The notable changes made through this queue instance, each once it committed: a head
   * quarantined by a settle (with its flow's group), and each operator action that changed
   * something — a redrive (one per head of `redriveAll`), a discard, a pause or resume that changed
   * the flow's or group's state, a policy change. What other processes do to the same store is not
   * in it (their audit rows are: `audit`). The stream subscribes when it starts running and sees
   * the changes from then on; a subscriber that reads slowly holds the changes it has not read.
   */
  readonly changes: Stream.Stream<NotableChange>
  /**
   * `changes`, subscribed at once: the queue it answers (until the scope closes) receives every
   * change made after this call — what a caller needs that must not miss one made right after.
   */
  readonly watchChanges: Effect.Effect<Queue.Dequeue<NotableChange>, never, Scope.Scope>
  /**
   * How long this queue keeps acked events and their dedup records (`prune` applies it): the
   * layer's `retention` option until the store keeps one set by `setPolicy`, then the store's —
   * as a process opened with explicit protocol settings adopts the store's changes to them.
   */
  readonly retention: Retention.Retention
  /**
   * Reads the store's retention (as `refreshPolicy`), then deletes acked events past
   * `retention.acked` (each leaves a dedup record) and dedup records past `retention.dedup`, in transactions of at most `Retention.PruneBatchSize` rows. Never
   * touches ready, inflight or quarantined events, flows, or audit rows.
   */
  readonly prune: (options?: Retention.PruneOptions) => Effect.Effect<Retention.PruneResult, InvalidInput | SqlError>
}

/** The queue service. */
export class RelayQueue extends Context.Tag("fair-relay/RelayQueue")<RelayQueue, RelayQueueService>() {}
