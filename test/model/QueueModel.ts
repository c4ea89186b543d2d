/**
 * A pure reference model of the relay queue, written from docs/protocol.md (its operations,
 * turn order, weights, groups and admission). It shares no code with `src/`: ids are plain strings,
 * bodies are compared by a canonical text computed here, and every decision below is re-derived
 * from the specification text, not from `src/domain/Protocol.ts`.
 *
 * The model is a plain mutable object; `clone` gives an independent copy so that a failing
 * operation (or a whole batch) can be discarded: every operation is all-or-nothing.
 *
 * What it defines:
 * - clock `{ tick, ticket }`: an operation that writes stores `max(tick, now)`. An operation whose
 *   outcome changes nothing — an enqueue answered `Existing`, a claim answered `Idle`, a settle
 *   answered `Stale` or `Expired`, a `setFlowWeight` to the weight the flow already has, a batch
 *   whose every item is one of these, and any operation that fails — leaves the clock (tick and
 *   ticket) as it was: a no-op does not write.
 *   "strict" clock: a write operation whose `now` is below the persisted tick fails with
 *   `ClockRegressed` and changes nothing (docs/protocol.md, Clock) — checked first, even when the
 *   operation would have been a no-op. "clamp" clock: nothing is refused; every decision
 *   (eligibility, lease expiry, `nextAt = now + delay`, `leaseUntil = now + lease`, a redrive's
 *   `nextAt`) uses the caller's own `now`; the persisted tick only ever grows, and an audit row
 *   records it (the tick as the redrive stores it, max(tick, now)).
 * - flows `{ flowId, seq, served, weight, burst, group }`; `headSeq` (lowest non-acked seq) and
 *   `eligibleAt` (ready → nextAt, inflight → leaseUntil, quarantined or no head → null) are
 *   derived from the events.
 * - groups `{ groupId, served, weight, burst }` (README "Tenants"): a flow's first event fixes its
 *   group (a later event naming another, or naming one for a flow that has none, is
 *   `GroupConflict`; leaving it out is fine). A claim picks among *units* — each group with an
 *   eligible head, and each flow of no group with an eligible head — the least `(served, id)`,
 *   a flow before a group of the same id; in a group, its eligible flow with the least
 *   `(served, flowId)`. The claim's ticket charges the flow and the group alike (weight w: w
 *   claims in a row, then served = ticket). A group is admitted like a flow, when it gets an
 *   unacked event while none of its flows has one (new: served 0, weight 1): tail takes the next
 *   ticket — before the flow's own — and starts a new turn, seed keeps its place and turn.
 *   `setGroupWeight` of an unknown group creates it with served 0 (admitted with its first event).
 * - events with every field of docs/protocol.md, Records; audit rows `{ eventId, reason,
 *   generation, tick }`.
 * - outcomes and typed errors of enqueue, enqueueBatch, setFlowWeight, claim, claimBatch, settle,
 *   settleBatch, redrive, discard, pause/resume and redriveAll.
 * - operators' actions (docs/operations.md): `discard` takes a quarantined head out of its flow for
 *   good (state discarded, a new generation; the flow goes on from its next event, as after an
 *   ack). `pause`/`resume` of a flow or a group (every flow of it): a claim passes over a paused
 *   flow's head and every head of a paused group's flows, and so does the wake-up time; the flow
 *   keeps its `served` and burst. Each is audited (target `flow:F` / `group:G`, no event), even
 *   when it changes nothing (pausing a paused flow), and the audit row is a write: the tick
 *   becomes max(tick, now). An unknown flow or group is `TargetNotFound`, nothing written.
 *   `redriveAll` releases every quarantined head the filter names (a group, a flow-id prefix, or
 *   all), in event-id order (UTF-8 bytes), each as a single redrive with its own audit row
 *   (target `bulk:` and the filter as JSON); a dry run lists them (at their current generation)
 *   and writes nothing; `pages` is the number of pages of `pageSize` (default 100) it took.
 * - argument checks (`InvalidInput`): ids 1–200 UTF-16 units, not blank, no C0/DEL/C1 control
 *   characters; generations non-negative integers; replies with a known tag and well-typed fields;
 *   weights integers 1..1,000,000; batch sizes 1..10,000; redrive reasons up to 10,000 and actors
 *   up to 200 characters. Argument checks come before anything else; a blank redrive reason is
 *   `MissingReason` before the store is read.
 */

/** A JSON value. */
export type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

export type State = "ready" | "inflight" | "acked" | "quarantined" | "discarded"

export interface ModelEvent {
  readonly eventId: string
  readonly flowId: string
  readonly seq: number
  readonly body: Json
  readonly state: State
  readonly nextAt: number
  readonly leaseUntil: number | null
  readonly generation: number
  readonly attempts: number
  readonly lifetimeAttempts: number
  readonly reason: string | null
}

export interface ModelFlowRow {
  readonly flowId: string
  readonly seq: number
  readonly served: number
  readonly headSeq: number | null
  readonly eligibleAt: number | null
  readonly weight: number
  readonly burst: number
  readonly group: string | null
  /** Set by a flow's first discard: the event after the discarded run, and the seq before the run. */
  readonly resume?: { readonly seq: number; readonly after: number }
}

export interface ModelGroupRow {
  readonly groupId: string
  readonly served: number
  readonly weight: number
  readonly burst: number
}

export interface ModelAudit {
  /** The event it touched (null for a pause or resume). */
  readonly eventId: string | null
  readonly reason: string
  /** The event's generation after it (null when no event was touched). */
  readonly generation: number | null
  readonly tick: number
  /** Who decided, when the caller said (else null). */
  readonly actor: string | null
  readonly action: "redrive" | "discard" | "pause" | "resume"
  /** `flow:F` or `group:G` for a pause or resume, `bulk:FILTER` for a bulk redrive, else null. */
  readonly target: string | null
}

export interface ModelSnapshot {
  readonly clock: { readonly tick: number; readonly ticket: number }
  readonly flows: ReadonlyArray<ModelFlowRow>
  readonly groups: ReadonlyArray<ModelGroupRow>
  readonly events: ReadonlyArray<ModelEvent>
  readonly audit: ReadonlyArray<ModelAudit>
}

export interface ModelPolicy {
  readonly leaseTicks: number
  readonly retryBudget: number
  readonly backoffBase: number
  readonly backoffCap: number
  readonly admission: "seed" | "tail"
  /** What a write does with a clock below the persisted tick: refuse it, or go on with it. */
  readonly clock: "strict" | "clamp"
}

/** Behaviour switches for gaps found in src that the model tolerates until they are fixed. */
export interface ModelOptions {
  /**
   * GAP (reported): src resets a flow's burst whenever a weight is *given* for an existing flow,
   * even when it equals the current weight, so a producer that passes its weight on every
   * enqueue keeps its flow at the front of the rotation. The model expects a weight that does
   * not change to change nothing; `true` makes it mimic src instead.
   */
  readonly sameWeightResetsBurst: boolean
  /**
   * GAP (reported): under seed admission a drained flow that gets a new event keeps its place
   * (`served`) — and src also resets its burst, so a weight-w flow that is refilled after each
   * ack never uses up its w claims and never moves behind the others. The model expects the
   * burst to be kept (only tail admission, which moves the flow to the back, starts a new turn);
   * `true` makes it mimic src instead.
   */
  readonly seedReadmissionResetsBurst: boolean
}

export type Reply =
  | { readonly _tag: "Accepted" }
  | { readonly _tag: "Duplicate" }
  | { readonly _tag: "IdConflict" }
  | { readonly _tag: "SequenceConflict" }
  | { readonly _tag: "Rejected"; readonly code: string }
  | { readonly _tag: "Retry"; readonly reason: string; readonly retryAfter?: number }
  | { readonly _tag: "Gap"; readonly expected: number }

export type ModelError =
  | { readonly _tag: "InvalidInput"; readonly operation: string }
  | { readonly _tag: "ClockRegressed"; readonly now: number; readonly tick: number }
  | { readonly _tag: "EnqueueConflict"; readonly eventId: string; readonly storedFlowId: string; readonly storedSeq: number }
  | { readonly _tag: "EventNotFound"; readonly eventId: string }
  | { readonly _tag: "NotQuarantined"; readonly eventId: string; readonly state: string }
  | { readonly _tag: "GenerationMismatch"; readonly eventId: string; readonly expected: number; readonly actual: number }
  | { readonly _tag: "MissingReason"; readonly eventId: string }
  | { readonly _tag: "GroupConflict"; readonly flowId: string; readonly storedGroup: string | null; readonly requestedGroup: string }
  | { readonly _tag: "TargetNotFound"; readonly kind: "flow" | "group"; readonly id: string }

export type Result<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly error: ModelError }

export type EnqueueOutcome = { readonly _tag: "Enqueued"; readonly seq: number } | { readonly _tag: "Existing"; readonly seq: number }
export type ClaimedOutcome = {
  readonly _tag: "Claimed"
  readonly token: { readonly eventId: string; readonly generation: number }
  readonly event: ModelEvent
  readonly leaseUntil: number
  /** The event right after a run of discarded ones: the seq before that run (what the receiver last applied). */
  readonly previousSeq?: number
}
export type ClaimOutcome = ClaimedOutcome | { readonly _tag: "Idle"; readonly wakeAt?: number }
export type SettleOutcome =
  | { readonly _tag: "Acked" }
  | { readonly _tag: "RetryScheduled"; readonly nextAt: number }
  | { readonly _tag: "Quarantined"; readonly reason: string }
  | { readonly _tag: "Stale" }
  | { readonly _tag: "Expired" }

export interface EnqueueArgs {
  readonly eventId: unknown
  readonly flowId: unknown
  readonly body: unknown
  readonly weight?: unknown
  readonly group?: unknown
}

/** What a pause or resume did. */
export type PauseOutcome = {
  readonly _tag: "Paused" | "Resumed"
  readonly target: { readonly kind: "flow" | "group"; readonly id: string }
  readonly changed: boolean
}

/** One head of a bulk redrive. */
export interface BulkHead {
  readonly eventId: string
  readonly flowId: string
  readonly group: string | null
  readonly reason: string | null
  readonly generation: number
}

/** Which quarantined heads a bulk redrive takes (the model knows these three). */
export type BulkFilter = { readonly group: string } | { readonly flowPrefix: string } | { readonly all: true }

export interface TokenArgs {
  readonly eventId: unknown
  readonly generation: unknown
}

const MaxId = 200
const MaxWeight = 1_000_000
const MaxBatch = 10_000
const MaxReason = 10_000
const MaxActor = 200

// ---------------------------------------------------------------------------------------------
// Argument checks

const isControl = (code: number) => code <= 0x1f || (code >= 0x7f && code <= 0x9f)

const isHighSurrogate = (code: number) => code >= 0xd800 && code <= 0xdbff
const isLowSurrogate = (code: number) => code >= 0xdc00 && code <= 0xdfff

/**
 * docs/protocol.md, Records: ids are 1–200 characters (UTF-16 units), not blank, without control
 * characters — and well-formed Unicode (a lone surrogate has no byte form in the store).
 */
export const validId = (value: unknown): value is string => {
  if (typeof value !== "string") return false
  if (value.length === 0 || value.length > MaxId) return false
  if (value.trim() === "") return false
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i)
    if (isControl(code)) return false
    if (isHighSurrogate(code)) {
      if (!isLowSurrogate(value.charCodeAt(i + 1))) return false
      i++
    } else if (isLowSurrogate(code)) {
      return false
    }
  }
  return true
}

const isNonNegativeInt = (value: unknown): value is number =>
  typeof value === "number" && Number.isInteger(value) && value >= 0

const isWeight = (value: unknown): value is number =>
  typeof value === "number" && Number.isInteger(value) && value >= 1 && value <= MaxWeight

/** A canonical text of a plain JSON value (sorted keys), or undefined when it is not plain JSON. */
export const canonicalText = (value: unknown): string | undefined => {
  const seen = new Set<object>()
  const go = (v: unknown): string | undefined => {
    if (v === null) return "null"
    if (typeof v === "boolean") return String(v)
    if (typeof v === "string") return JSON.stringify(v)
    if (typeof v === "number") return Number.isFinite(v) ? JSON.stringify(v) : undefined
    if (typeof v !== "object") return undefined
    if (seen.has(v)) return undefined
    seen.add(v)
    try {
      if (Array.isArray(v)) {
        const parts: Array<string> = []
        for (let i = 0; i < v.length; i++) {
          if (!Object.prototype.hasOwnProperty.call(v, i)) return undefined
          const part = go(v[i])
          if (part === undefined) return undefined
          parts.push(part)
        }
        return `[${parts.join(",")}]`
      }
      const proto = Object.getPrototypeOf(v)
      if (proto !== Object.prototype && proto !== null) return undefined
      const rec = v as Record<string, unknown>
      const parts: Array<string> = []
      for (const key of Object.keys(rec).sort()) {
        const part = go(rec[key])
        if (part === undefined) return undefined
        parts.push(`${JSON.stringify(key)}:${part}`)
      }
      return `{${parts.join(",")}}`
    } finally {
      seen.delete(v)
    }
  }
  return go(value)
}

const isReply = (value: unknown): value is Reply => {
  if (typeof value !== "object" || value === null) return false
  const r = value as Record<string, unknown>
  switch (r._tag) {
    case "Accepted":
    case "Duplicate":
    case "IdConflict":
    case "SequenceConflict":
      return true
    case "Rejected":
      return typeof r.code === "string"
    case "Retry":
      return typeof r.reason === "string" &&
        (r.retryAfter === undefined || (typeof r.retryAfter === "number" && Number.isSafeInteger(r.retryAfter) && r.retryAfter >= 0))
    case "Gap":
      return typeof r.expected === "number" && Number.isInteger(r.expected) && r.expected >= 1
    default:
      return false
  }
}

const isToken = (value: unknown): value is { eventId: string; generation: number } =>
  typeof value === "object" && value !== null && validId((value as TokenArgs).eventId) &&
  isNonNegativeInt((value as TokenArgs).generation)

/** Ids order by their UTF-8 bytes (SQLite's BINARY collation). */
export const compareUtf8 = (a: string, b: string): number => Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"))

// ---------------------------------------------------------------------------------------------
// The model

interface FlowState {
  flowId: string
  seq: number
  served: number
  weight: number
  burst: number
  group: string | null
  paused?: boolean
  resume?: { readonly seq: number; readonly after: number }
}

interface GroupState {
  groupId: string
  served: number
  weight: number
  burst: number
  paused?: boolean
}

interface EventState {
  event: ModelEvent
  bodyText: string
}

const invalid = (operation: string): Result<never> => ({ ok: false, error: { _tag: "InvalidInput", operation } })
const fail = (error: ModelError): Result<never> => ({ ok: false, error })
const ok = <A>(value: A): Result<A> => ({ ok: true, value })

/** A settle outcome that changed the event (`Stale` and `Expired` change nothing). */
const settled = (outcome: SettleOutcome): boolean => outcome._tag !== "Stale" && outcome._tag !== "Expired"

export class QueueModel {
  tick = 0
  ticket = 0
  flows = new Map<string, FlowState>()
  groups = new Map<string, GroupState>()
  events = new Map<string, EventState>()
  /** Events of each flow, by seq (index seq − 1). */
  byFlow = new Map<string, Array<string>>()
  audit: Array<ModelAudit> = []

  constructor(readonly policy: ModelPolicy, readonly options: ModelOptions) {}

  clone(): QueueModel {
    const copy = new QueueModel(this.policy, this.options)
    copy.tick = this.tick
    copy.ticket = this.ticket
    for (const [k, f] of this.flows) copy.flows.set(k, { ...f })
    for (const [k, g] of this.groups) copy.groups.set(k, { ...g })
    for (const [k, e] of this.events) copy.events.set(k, { event: e.event, bodyText: e.bodyText })
    for (const [k, ids] of this.byFlow) copy.byFlow.set(k, [...ids])
    copy.audit = [...this.audit]
    return copy
  }

  /** Adopts the state of `other` (a clone that an operation succeeded on). */
  private adopt(other: QueueModel) {
    this.tick = other.tick
    this.ticket = other.ticket
    this.flows = other.flows
    this.groups = other.groups
    this.events = other.events
    this.byFlow = other.byFlow
    this.audit = other.audit
  }

  /**
   * Runs a write operation at `now` on a copy and keeps the copy only when the operation succeeds
   * and `writes` says its outcome changed something; then the tick becomes max(tick, now). A
   * "strict" clock below the persisted tick is refused before the operation is looked at.
   */
  private atomically<A>(now: number, op: (m: QueueModel, now: number) => Result<A>, writes: (value: A) => boolean): Result<A> {
    if (this.policy.clock === "strict" && now < this.tick) return fail({ _tag: "ClockRegressed", now, tick: this.tick })
    const draft = this.clone()
    const result = op(draft, now)
    if (result.ok && writes(result.value)) {
      draft.tick = Math.max(draft.tick, now)
      this.adopt(draft)
    }
    return result
  }

  private head(flowId: string): ModelEvent | undefined {
    for (const id of this.byFlow.get(flowId) ?? []) {
      const e = this.events.get(id)!.event
      if (e.state !== "acked" && e.state !== "discarded") return e
    }
    return undefined
  }

  private static eligibleAt(head: ModelEvent | undefined): number | null {
    if (head === undefined) return null
    if (head.state === "ready") return head.nextAt
    if (head.state === "inflight") return head.leaseUntil
    return null
  }

  private setEvent(e: ModelEvent) {
    const stored = this.events.get(e.eventId)!
    this.events.set(e.eventId, { event: e, bodyText: stored.bodyText })
  }

  private setWeight(flow: { weight: number; burst: number }, weight: number) {
    if (flow.weight === weight && !this.options.sameWeightResetsBurst) return
    flow.weight = weight
    flow.burst = 0
  }

  // --- enqueue ------------------------------------------------------------------------------

  private validEnqueue(
    args: EnqueueArgs
  ): { eventId: string; flowId: string; body: Json; text: string; weight: number | undefined; group: string | undefined } | undefined {
    if (typeof args !== "object" || args === null) return undefined
    if (!validId(args.eventId) || !validId(args.flowId)) return undefined
    const text = canonicalText(args.body)
    if (text === undefined) return undefined
    if (args.weight !== undefined && !isWeight(args.weight)) return undefined
    if (args.group !== undefined && !validId(args.group)) return undefined
    return { eventId: args.eventId, flowId: args.flowId, body: JSON.parse(text) as Json, text, weight: args.weight, group: args.group }
  }

  /** Whether any flow of the group has an unacked event. */
  private groupActive(groupId: string): boolean {
    for (const flow of this.flows.values()) if (flow.group === groupId && this.head(flow.flowId) !== undefined) return true
    return false
  }

  private enqueueValid(
    m: QueueModel,
    cmd: { eventId: string; flowId: string; body: Json; text: string; weight: number | undefined; group: string | undefined },
    now: number
  ): Result<EnqueueOutcome> {
    const stored = m.events.get(cmd.eventId)
    if (stored !== undefined) {
      if (stored.event.flowId === cmd.flowId && stored.bodyText === cmd.text) return ok({ _tag: "Existing", seq: stored.event.seq })
      return fail({ _tag: "EnqueueConflict", eventId: cmd.eventId, storedFlowId: stored.event.flowId, storedSeq: stored.event.seq })
    }
    let flow = m.flows.get(cmd.flowId)
    // A flow that has had an event keeps the group its first event gave it (or none).
    if (cmd.group !== undefined && flow !== undefined && flow.seq > 0 && flow.group !== cmd.group) {
      return fail({ _tag: "GroupConflict", flowId: cmd.flowId, storedGroup: flow.group, requestedGroup: cmd.group })
    }
    const hadHead = flow !== undefined && m.head(cmd.flowId) !== undefined
    // The group the flow is in once this event is stored.
    const joins = flow === undefined || flow.seq === 0 ? cmd.group ?? flow?.group ?? null : flow.group
    if (joins !== null && !hadHead && !m.groupActive(joins)) {
      // The group gets its first unacked event: admitted like a flow, before the flow.
      let group = m.groups.get(joins)
      if (group === undefined) {
        group = { groupId: joins, served: 0, weight: 1, burst: 0 }
        m.groups.set(joins, group)
      }
      if (m.policy.admission === "tail") {
        m.ticket += 1
        group.served = m.ticket
        group.burst = 0
      }
    }
    if (flow === undefined) {
      // docs/protocol.md, Enqueue: a new flow starts at served = 0 (seed); "tail" takes the next
      // ticket.
      flow = { flowId: cmd.flowId, seq: 0, served: 0, weight: cmd.weight ?? 1, burst: 0, group: cmd.group ?? null }
      m.flows.set(cmd.flowId, flow)
      m.byFlow.set(cmd.flowId, [])
    } else {
      if (flow.seq === 0 && cmd.group !== undefined) flow.group = cmd.group
      if (cmd.weight !== undefined) m.setWeight(flow, cmd.weight)
    }
    if (!hadHead) {
      // The flow (new, or drained) gets a head again. Seed: it keeps its place and its turn.
      // Tail (README): it takes the next ticket, i.e. goes behind everyone, for a new turn.
      if (m.policy.admission === "tail") {
        m.ticket += 1
        flow.served = m.ticket
        flow.burst = 0
      } else if (m.options.seedReadmissionResetsBurst) {
        flow.burst = 0
      }
    }
    flow.seq += 1
    const event: ModelEvent = {
      eventId: cmd.eventId,
      flowId: cmd.flowId,
      seq: flow.seq,
      body: cmd.body,
      state: "ready",
      nextAt: now,
      leaseUntil: null,
      generation: 0,
      attempts: 0,
      lifetimeAttempts: 0,
      reason: null
    }
    m.events.set(cmd.eventId, { event, bodyText: cmd.text })
    m.byFlow.get(cmd.flowId)!.push(cmd.eventId)
    return ok({ _tag: "Enqueued", seq: flow.seq })
  }

  enqueue(args: EnqueueArgs, now: number): Result<EnqueueOutcome> {
    const cmd = this.validEnqueue(args)
    if (cmd === undefined) return invalid("enqueue")
    return this.atomically(now, (m, now) => this.enqueueValid(m, cmd, now), (outcome) => outcome._tag === "Enqueued")
  }

  enqueueBatch(items: unknown, now: number): Result<ReadonlyArray<EnqueueOutcome>> {
    if (!Array.isArray(items) || items.length > MaxBatch) return invalid("enqueueBatch")
    const cmds: Array<NonNullable<ReturnType<QueueModel["validEnqueue"]>>> = []
    for (const item of items) {
      const cmd = this.validEnqueue(item as EnqueueArgs)
      if (cmd === undefined) return invalid("enqueueBatch")
      cmds.push(cmd)
    }
    return this.atomically(now, (m, now) => {
      const results: Array<EnqueueOutcome> = []
      for (const cmd of cmds) {
        const r = this.enqueueValid(m, cmd, now)
        if (!r.ok) return r
        results.push(r.value)
      }
      return ok(results)
    }, (outcomes) => outcomes.some((o) => o._tag === "Enqueued"))
  }

  setFlowWeight(args: { flowId: unknown; weight: unknown }, now: number): Result<void> {
    if (!validId(args.flowId) || !isWeight(args.weight)) return invalid("setFlowWeight")
    const flowId = args.flowId
    const weight = args.weight
    // The weight the flow already has changes nothing, so nothing is written.
    let changed = true
    return this.atomically(now, (m) => {
      const flow = m.flows.get(flowId)
      if (flow === undefined) {
        // A flow named before its first event: no head, served 0 until it is admitted.
        m.flows.set(flowId, { flowId, seq: 0, served: 0, weight, burst: 0, group: null })
        m.byFlow.set(flowId, [])
      } else {
        changed = flow.weight !== weight || (m.options.sameWeightResetsBurst && flow.burst !== 0)
        m.setWeight(flow, weight)
      }
      return ok(undefined)
    }, () => changed)
  }

  setGroupWeight(args: { groupId: unknown; weight: unknown }, now: number): Result<void> {
    if (!validId(args.groupId) || !isWeight(args.weight)) return invalid("setGroupWeight")
    const groupId = args.groupId
    const weight = args.weight
    let changed = true
    return this.atomically(now, (m) => {
      const group = m.groups.get(groupId)
      if (group === undefined) m.groups.set(groupId, { groupId, served: 0, weight, burst: 0 })
      else {
        changed = group.weight !== weight
        if (changed) {
          group.weight = weight
          group.burst = 0
        }
      }
      return ok(undefined)
    }, () => changed)
  }

  // --- claim --------------------------------------------------------------------------------

  private claimOne(m: QueueModel, now: number): ClaimedOutcome | undefined {
    // The eligible flows, and the units they make: a group, or a flow of no group.
    const eligible: Array<{ flow: FlowState; head: ModelEvent }> = []
    for (const flow of m.flows.values()) {
      if (m.isPaused(flow)) continue
      const head = m.head(flow.flowId)
      const at = QueueModel.eligibleAt(head)
      if (head === undefined || at === null || at > now) continue
      eligible.push({ flow, head })
    }
    const unitOf = (c: { flow: FlowState }) =>
      c.flow.group === null
        ? { served: c.flow.served, id: c.flow.flowId, kind: 0 }
        : { served: m.groups.get(c.flow.group)!.served, id: c.flow.group, kind: 1 }
    const before = (a: { served: number; id: string }, b: { served: number; id: string }) =>
      a.served < b.served || (a.served === b.served && compareUtf8(a.id, b.id) < 0)
    let unit: { served: number; id: string; kind: number } | undefined
    for (const c of eligible) {
      const u = unitOf(c)
      if (unit === undefined || before(u, unit) || (u.served === unit.served && u.id === unit.id && u.kind < unit.kind)) unit = u
    }
    if (unit === undefined) return undefined
    const chosen = unit
    let best: { flow: FlowState; head: ModelEvent } | undefined
    for (const c of eligible) {
      const u = unitOf(c)
      if (u.id !== chosen.id || u.kind !== chosen.kind) continue
      if (best === undefined || before({ served: c.flow.served, id: c.flow.flowId }, { served: best.flow.served, id: best.flow.flowId })) best = c
    }
    if (best === undefined) return undefined
    m.ticket += 1
    // docs/protocol.md, Turn order: at weight 1, served = ticket; weight w keeps its place for w
    // claims in a row — for the flow, and for its group.
    for (const turn of best.flow.group === null ? [best.flow] : [best.flow, m.groups.get(best.flow.group)!]) {
      if (turn.burst + 1 >= turn.weight) {
        turn.served = m.ticket
        turn.burst = 0
      } else {
        turn.burst += 1
      }
    }
    const claimed: ModelEvent = {
      ...best.head,
      state: "inflight",
      generation: best.head.generation + 1,
      attempts: best.head.attempts + 1,
      lifetimeAttempts: best.head.lifetimeAttempts + 1,
      leaseUntil: now + m.policy.leaseTicks
    }
    m.setEvent(claimed)
    const resume = best.flow.resume
    return {
      _tag: "Claimed",
      token: { eventId: claimed.eventId, generation: claimed.generation },
      event: claimed,
      leaseUntil: now + m.policy.leaseTicks,
      ...(resume !== undefined && resume.seq === claimed.seq ? { previousSeq: resume.after } : {})
    }
  }

  /** Whether a flow is passed over: paused itself, or in a paused group. */
  private isPaused(flow: FlowState): boolean {
    return flow.paused === true || (flow.group !== null && this.groups.get(flow.group)?.paused === true)
  }

  /** Whether a paused flow (or a flow of a paused group) has a head a claim would take at `now` but for the pause. */
  pausedHeadHeld(now: number): boolean {
    for (const flow of this.flows.values()) {
      const at = QueueModel.eligibleAt(this.head(flow.flowId))
      if (this.isPaused(flow) && at !== null && at <= now) return true
    }
    return false
  }

  /** The earliest tick at which some head becomes eligible (all are later than now when idle). */
  private wakeAt(): number | undefined {
    let wake: number | undefined
    for (const flow of this.flows.values()) {
      if (this.isPaused(flow)) continue
      const at = QueueModel.eligibleAt(this.head(flow.flowId))
      if (at !== null && (wake === undefined || at < wake)) wake = at
    }
    return wake
  }

  claim(now: number): Result<ClaimOutcome> {
    return this.atomically(now, (m, now): Result<ClaimOutcome> => {
      const claimed = this.claimOne(m, now)
      if (claimed !== undefined) return ok(claimed)
      const wakeAt = m.wakeAt()
      return ok(wakeAt === undefined ? { _tag: "Idle" } : { _tag: "Idle", wakeAt })
    }, (outcome) => outcome._tag === "Claimed")
  }

  claimBatch(limit: unknown, now: number): Result<ReadonlyArray<ClaimedOutcome>> {
    if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > MaxBatch) return invalid("claimBatch")
    return this.atomically(now, (m, now) => {
      const claims: Array<ClaimedOutcome> = []
      while (claims.length < limit) {
        const claimed = this.claimOne(m, now)
        if (claimed === undefined) break
        claims.push(claimed)
      }
      return ok(claims)
    }, (claims) => claims.length > 0)
  }

  // --- settle -------------------------------------------------------------------------------

  private settleValid(m: QueueModel, token: { eventId: string; generation: number }, reply: Reply, now: number): SettleOutcome {
    const stored = m.events.get(token.eventId)
    if (stored === undefined) return { _tag: "Stale" }
    const e = stored.event
    if (e.generation !== token.generation || e.state !== "inflight") return { _tag: "Stale" }
    if (e.leaseUntil === null || now >= e.leaseUntil) return { _tag: "Expired" }
    const quarantine = (reason: string): SettleOutcome => {
      // A quarantined head's nextAt says when it was quarantined.
      m.setEvent({ ...e, state: "quarantined", leaseUntil: null, reason, nextAt: now })
      return { _tag: "Quarantined", reason }
    }
    switch (reply._tag) {
      case "Accepted":
      case "Duplicate":
        m.setEvent({ ...e, state: "acked", leaseUntil: null })
        return { _tag: "Acked" }
      case "IdConflict":
        return quarantine("id_conflict")
      case "SequenceConflict":
        return quarantine("sequence_conflict")
      case "Rejected":
        return quarantine(reply.code)
      case "Retry":
      case "Gap": {
        const reason = reply._tag === "Retry" ? reply.reason : `gap: receiver expects seq ${reply.expected}`
        if (e.attempts >= m.policy.retryBudget) return quarantine(reason)
        const schedule = Math.min(m.policy.backoffCap, m.policy.backoffBase * 2 ** (e.attempts - 1))
        // A receiver's least delay lengthens the wait, up to the cap and no further.
        const least = reply._tag === "Retry" ? reply.retryAfter : undefined
        const delay = least === undefined || least <= schedule ? schedule : Math.min(m.policy.backoffCap, least)
        const nextAt = now + delay
        // The last Retry reason is kept (the model's reasons are all shorter than the bound).
        m.setEvent({ ...e, state: "ready", nextAt, leaseUntil: null, reason })
        return { _tag: "RetryScheduled", nextAt }
      }
    }
  }

  settle(token: unknown, reply: unknown, now: number): Result<SettleOutcome> {
    if (!isToken(token) || !isReply(reply)) return invalid("settle")
    return this.atomically(now, (m, now) => ok(this.settleValid(m, token, reply, now)), settled)
  }

  settleBatch(items: unknown, now: number): Result<ReadonlyArray<SettleOutcome>> {
    if (!Array.isArray(items) || items.length > MaxBatch) return invalid("settleBatch")
    for (const item of items) {
      if (typeof item !== "object" || item === null) return invalid("settleBatch")
      if (!isToken((item as { token: unknown }).token) || !isReply((item as { reply: unknown }).reply)) return invalid("settleBatch")
    }
    const decoded = items as ReadonlyArray<{ token: { eventId: string; generation: number }; reply: Reply }>
    return this.atomically(
      now,
      (m, now) => ok(decoded.map(({ reply, token }) => this.settleValid(m, token, reply, now))),
      (outcomes) => outcomes.some(settled)
    )
  }

  /** `settleBatch(items)` then `claimBatch(limit)` in one write; when it claims nothing, when to look again. */
  settleAndClaim(
    items: unknown,
    limit: unknown,
    now: number
  ): Result<{ outcomes: ReadonlyArray<SettleOutcome>; claims: ReadonlyArray<ClaimedOutcome>; wakeAt?: number }> {
    if (!Array.isArray(items) || items.length > MaxBatch) return invalid("settleAndClaim")
    for (const item of items) {
      if (typeof item !== "object" || item === null) return invalid("settleAndClaim")
      if (!isToken((item as { token: unknown }).token) || !isReply((item as { reply: unknown }).reply)) return invalid("settleAndClaim")
    }
    if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 0 || limit > MaxBatch) return invalid("settleAndClaim")
    const decoded = items as ReadonlyArray<{ token: { eventId: string; generation: number }; reply: Reply }>
    return this.atomically(now, (m, now) => {
      const outcomes = decoded.map(({ reply, token }) => this.settleValid(m, token, reply, now))
      const claims: Array<ClaimedOutcome> = []
      while (claims.length < limit) {
        const claimed = this.claimOne(m, now)
        if (claimed === undefined) break
        claims.push(claimed)
      }
      const wakeAt = limit > 0 && claims.length === 0 ? m.wakeAt() : undefined
      return ok(wakeAt === undefined ? { outcomes, claims } : { outcomes, claims, wakeAt })
    }, (result) => result.outcomes.some(settled) || result.claims.length > 0)
  }

  // --- redrive ------------------------------------------------------------------------------

  redrive(
    args: { eventId: unknown; expectedGeneration: unknown; reason: unknown; actor?: unknown },
    now: number
  ): Result<{ _tag: "Redriven"; generation: number }> {
    if (!validId(args.eventId) || !isNonNegativeInt(args.expectedGeneration)) return invalid("redrive")
    if (typeof args.reason !== "string" || args.reason.length > MaxReason) return invalid("redrive")
    if (args.actor !== undefined && (typeof args.actor !== "string" || args.actor.length > MaxActor)) return invalid("redrive")
    const { eventId, expectedGeneration, reason } = args as { eventId: string; expectedGeneration: number; reason: string }
    const actor = (args.actor as string | undefined) ?? null
    if (reason.trim() === "") return fail({ _tag: "MissingReason", eventId })
    return this.atomically(now, (m, now) => {
      const stored = m.events.get(eventId)
      if (stored === undefined) return fail({ _tag: "EventNotFound", eventId })
      const e = stored.event
      if (e.state !== "quarantined") return fail({ _tag: "NotQuarantined", eventId, state: e.state })
      if (e.generation !== expectedGeneration) {
        return fail({ _tag: "GenerationMismatch", eventId, expected: expectedGeneration, actual: e.generation })
      }
      const generation = e.generation + 1
      m.setEvent({ ...e, state: "ready", generation, attempts: 0, reason: null, nextAt: now, leaseUntil: null })
      // The audit row carries the store's tick as this write stores it (max(tick, now)), so the
      // audit is in tick order even when a "clamp" caller's clock is behind.
      m.audit.push({ eventId, reason, generation, tick: Math.max(m.tick, now), actor, action: "redrive", target: null })
      return ok({ _tag: "Redriven" as const, generation })
    }, () => true)
  }

  // --- operators' actions -------------------------------------------------------------------

  private static validReason(reason: unknown): reason is string {
    return typeof reason === "string" && reason.length <= MaxReason
  }

  private static validActor(actor: unknown): boolean {
    return actor === undefined || (typeof actor === "string" && actor.length <= MaxActor)
  }

  discard(
    args: { eventId: unknown; expectedGeneration: unknown; reason: unknown; actor?: unknown },
    now: number
  ): Result<{ _tag: "Discarded"; generation: number; nextHead: string | null }> {
    if (!validId(args.eventId) || !isNonNegativeInt(args.expectedGeneration)) return invalid("discard")
    if (!QueueModel.validReason(args.reason) || !QueueModel.validActor(args.actor)) return invalid("discard")
    const { eventId, expectedGeneration, reason } = args as { eventId: string; expectedGeneration: number; reason: string }
    const actor = (args.actor as string | undefined) ?? null
    if (reason.trim() === "") return fail({ _tag: "MissingReason", eventId })
    return this.atomically(now, (m, now) => {
      const stored = m.events.get(eventId)
      if (stored === undefined) return fail({ _tag: "EventNotFound", eventId })
      const e = stored.event
      if (e.state !== "quarantined") return fail({ _tag: "NotQuarantined", eventId, state: e.state })
      if (e.generation !== expectedGeneration) {
        return fail({ _tag: "GenerationMismatch", eventId, expected: expectedGeneration, actual: e.generation })
      }
      const generation = e.generation + 1
      // Out of the flow for good: its reason and times stay as they were, for the audit.
      m.setEvent({ ...e, state: "discarded", generation, leaseUntil: null })
      m.audit.push({ eventId, reason, generation, tick: Math.max(m.tick, now), actor, action: "discard", target: null })
      // The flow goes on from the event after it, which resumes after the last seq before the
      // discarded run this head ends (a head discarded right after another extends that run).
      const flow = m.flows.get(e.flowId)!
      flow.resume = { seq: e.seq + 1, after: flow.resume !== undefined && flow.resume.seq === e.seq ? flow.resume.after : e.seq - 1 }
      // The flow goes on from the event after it (seq e.seq + 1 sits at index e.seq).
      const nextHead = m.byFlow.get(e.flowId)![e.seq] ?? null
      return ok({ _tag: "Discarded" as const, generation, nextHead })
    }, () => true)
  }

  /** Pauses (`paused` true) or resumes one flow or one group. */
  setPaused(args: { flowId?: unknown; group?: unknown; reason: unknown; actor?: unknown }, paused: boolean, now: number): Result<PauseOutcome> {
    const operation = paused ? "pause" : "resume"
    const kind = args.flowId !== undefined ? "flow" as const : "group" as const
    const id = kind === "flow" ? args.flowId : args.group
    if (!validId(id) || !QueueModel.validReason(args.reason) || !QueueModel.validActor(args.actor)) return invalid(operation)
    // A blank reason is malformed here (there is no event to name in a MissingReason).
    if (args.reason.trim() === "") return invalid(operation)
    const reason = args.reason
    const actor = (args.actor as string | undefined) ?? null
    return this.atomically(now, (m, now) => {
      const target = kind === "flow" ? m.flows.get(id) : m.groups.get(id)
      if (target === undefined) return fail({ _tag: "TargetNotFound", kind, id })
      const changed = (target.paused === true) !== paused
      target.paused = paused
      m.audit.push({ eventId: null, reason, generation: null, tick: Math.max(m.tick, now), actor, action: operation, target: `${kind}:${id}` })
      return ok({ _tag: paused ? "Paused" as const : "Resumed" as const, target: { kind, id }, changed })
    }, () => true)
  }

  /** Redrives every quarantined head `filter` names, or (dry) lists them. */
  redriveAll(
    args: { filter: BulkFilter; reason: unknown; actor?: unknown; dryRun?: boolean; pageSize?: number },
    now: number
  ): Result<{ dryRun: boolean; heads: ReadonlyArray<BulkHead>; skipped: number; pages: number }> {
    const pageSize = args.pageSize ?? 100
    if (!QueueModel.validReason(args.reason) || args.reason.trim() === "" || !QueueModel.validActor(args.actor)) return invalid("redriveAll")
    if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 1000) return invalid("redriveAll")
    if ("group" in args.filter && !validId(args.filter.group)) return invalid("redriveAll")
    const filter = args.filter
    const reason = args.reason
    const actor = (args.actor as string | undefined) ?? null
    const matches = (m: QueueModel, e: ModelEvent) =>
      e.state === "quarantined" &&
      ("all" in filter ||
        ("group" in filter ? m.flows.get(e.flowId)!.group === filter.group : e.flowId.startsWith(filter.flowPrefix)))
    const chosen = (m: QueueModel) => m.allEvents().filter((e) => matches(m, e)).sort((a, b) => compareUtf8(a.eventId, b.eventId))
    const headOf = (m: QueueModel, e: ModelEvent, generation: number): BulkHead => ({
      eventId: e.eventId,
      flowId: e.flowId,
      group: m.flows.get(e.flowId)!.group,
      reason: e.reason,
      generation
    })
    const pages = (n: number) => Math.ceil(n / pageSize)
    if (args.dryRun === true) {
      // Reads only: no clock check, nothing written.
      const heads = chosen(this).map((e) => headOf(this, e, e.generation))
      return ok({ dryRun: true, heads, skipped: 0, pages: pages(heads.length) })
    }
    return this.atomically(now, (m, now) => {
      const heads: Array<BulkHead> = []
      for (const e of chosen(m)) {
        const generation = e.generation + 1
        heads.push(headOf(m, e, generation))
        m.setEvent({ ...e, state: "ready", generation, attempts: 0, reason: null, nextAt: now, leaseUntil: null })
        m.audit.push({
          eventId: e.eventId,
          reason,
          generation,
          tick: Math.max(m.tick, now),
          actor,
          action: "redrive",
          target: `bulk:${JSON.stringify(filter)}`
        })
      }
      return ok({ dryRun: false, heads, skipped: 0, pages: pages(heads.length) })
    }, (result) => result.heads.length > 0)
  }

  // --- inspection ---------------------------------------------------------------------------

  snapshot(): ModelSnapshot {
    const flowIds = [...this.flows.keys()].sort(compareUtf8)
    return {
      clock: { tick: this.tick, ticket: this.ticket },
      flows: flowIds.map((flowId) => {
        const f = this.flows.get(flowId)!
        const head = this.head(flowId)
        return {
          flowId,
          seq: f.seq,
          served: f.served,
          headSeq: head?.seq ?? null,
          eligibleAt: QueueModel.eligibleAt(head),
          weight: f.weight,
          burst: f.burst,
          group: f.group,
          ...(f.resume === undefined ? {} : { resume: f.resume })
        }
      }),
      groups: [...this.groups.keys()].sort(compareUtf8).map((groupId) => {
        const g = this.groups.get(groupId)!
        return { groupId, served: g.served, weight: g.weight, burst: g.burst }
      }),
      events: flowIds.flatMap((flowId) => (this.byFlow.get(flowId) ?? []).map((id) => this.events.get(id)!.event)),
      audit: [...this.audit]
    }
  }

  /** All event records (any order). */
  allEvents(): ReadonlyArray<ModelEvent> {
    return [...this.events.values()].map((e) => e.event)
  }
}
