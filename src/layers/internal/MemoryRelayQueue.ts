/**
 * The queue over plain in-process data: the same reads and writes the SQL backend gives
 * (`QueueBackend`), for users' tests and tools that need no file. The state is immutable
 * (`HashMap`s): a write transaction works on its own copy and publishes it on commit, so a failed or
 * interrupted one changes nothing, and a read sees the state of one moment. Writes take turns
 * (one permit); nothing is persisted.
 */
import { SqlError } from "@effect/sql/SqlError"
import { Effect, HashMap, HashSet, Option } from "effect"
import type { EventId, FlowId } from "../../domain/Ids.js"
import { parseStored } from "../../domain/Json.js"
import type { Candidate, DedupRecord, PruneCandidate } from "../../domain/Operations.js"
import { positionKey, rotate } from "../../domain/Operations.js"
import { isSettledForGood, matchesRedriveFilter } from "../../domain/Operator.js"
import { compareIds, compareTurn } from "../../domain/Protocol.js"
import type { StoredIdentity } from "../../domain/Protocol.js"
import type { AuditRecord, ClockRecord, EventRecord, EventState, FlowRecord, GroupRecord } from "../../domain/Records.js"
import type { EventQuery, FlowQuery, FlowView, GroupView, QueueBackend, QueueReads, QueueWrites, StoredProtocol } from "../../services/QueueBackend.js"

/** An event as kept: its record without the body, and the body's canonical text (parsed on read, as SQL does). */
interface Stored {
  readonly record: Omit<EventRecord, "body">
  readonly bodyText: string
  /** When it was acked (retention counts from here). */
  readonly ackedAt: number | null
}

/** The whole store at one moment. */
interface State {
  readonly clock: ClockRecord
  readonly flows: HashMap.HashMap<string, FlowRecord>
  readonly groups: HashMap.HashMap<string, GroupRecord>
  readonly events: HashMap.HashMap<string, Stored>
  /** Event id by `positionKey` (flow and seq). */
  readonly positions: HashMap.HashMap<string, string>
  readonly audit: ReadonlyArray<AuditRecord>
  /** What is kept of pruned events, by id. */
  readonly dedup: HashMap.HashMap<string, DedupRecord>
  /** The protocol settings set by `setPolicy`, if any. */
  readonly protocol: StoredProtocol | undefined
  /** Paused flows and groups, by id (apart from their records, as the SQL backends keep them). */
  readonly paused: { readonly flows: HashSet.HashSet<string>; readonly groups: HashSet.HashSet<string> }
}

const empty: State = {
  clock: { tick: 0, ticket: 0 },
  flows: HashMap.empty(),
  groups: HashMap.empty(),
  events: HashMap.empty(),
  positions: HashMap.empty(),
  audit: [],
  dedup: HashMap.empty(),
  paused: { flows: HashSet.empty(), groups: HashSet.empty() },
  protocol: undefined
}

const toRecord = ({ bodyText, record }: Stored): EventRecord => ({ ...record, body: parseStored(bodyText) })

const byEventId = (a: EventRecord, b: EventRecord) => compareIds(a.eventId, b.eventId)
const byFlowId = (a: FlowRecord, b: FlowRecord) => compareIds(a.flowId, b.flowId)
const byGroupId = (a: GroupRecord, b: GroupRecord) => compareIds(a.groupId, b.groupId)
const byPosition = (a: EventRecord, b: EventRecord) => compareIds(a.flowId, b.flowId) || a.seq - b.seq

const isWaiting = (flow: FlowRecord, now: number) => flow.eligibleAt !== null && flow.eligibleAt <= now

/** Whether claims pass `flow` over: it is paused, or its group is. */
const isPaused = (state: State, flow: FlowRecord) =>
  HashSet.has(state.paused.flows, flow.flowId) || (flow.group !== null && HashSet.has(state.paused.groups, flow.group))

/** `flow` with the `resume` stored before it, as the SQL backends put flows (only a discard writes it: `setResume`). */
const withStoredResume = (flow: FlowRecord, stored: Option.Option<FlowRecord>): FlowRecord => {
  const resume = Option.isSome(stored) ? stored.value.resume : undefined
  if (flow.resume === resume) return flow
  const { resume: _resume, ...rest } = flow
  return resume === undefined ? rest : { ...rest, resume }
}

/** A failure the SQL backend would get from a constraint: the caller asked for something no operation does. */
const constraint = (message: string) => Effect.fail(new SqlError({ message, cause: message }))

/** Reads of the state `current` returns (the transaction's own copy in a write). */
const reads = (current: () => State): QueueReads => {
  const eventById = (id: string) => Option.map(HashMap.get(current().events, id), toRecord)
  const eventAt = (flowId: FlowId, seq: number) =>
    Option.flatMap(HashMap.get(current().positions, positionKey({ flowId, seq })), eventById)
  const allFlows = () => [...HashMap.values(current().flows)]
  const allGroups = () => [...HashMap.values(current().groups)]
  const allEvents = () => [...HashMap.values(current().events)].map(toRecord)

  return {
    clock: Effect.sync(() => current().clock),
    wakeAt: Effect.sync(() => {
      let least: number | null = null
      const state = current()
      for (const flow of HashMap.values(state.flows)) {
        const { eligibleAt } = flow
        if (eligibleAt !== null && (least === null || eligibleAt < least) && !isPaused(state, flow)) least = eligibleAt
      }
      return least
    }),
    candidates: (now, limit) =>
      Effect.sync(() => {
        // Bodies are parsed only for the heads handed out, not for every waiting flow.
        const waiting: Array<Candidate & { readonly stored: Stored }> = []
        const state = current()
        const { clock, events, flows, groups, positions } = state
        for (const flow of HashMap.values(flows)) {
          if (!isWaiting(flow, now) || flow.headSeq === null || isPaused(state, flow)) continue
          const head = Option.flatMap(HashMap.get(positions, positionKey({ flowId: flow.flowId, seq: flow.headSeq })), (id) =>
            HashMap.get(events, id))
          const group = flow.group === null ? undefined : Option.getOrUndefined(HashMap.get(groups, flow.group))
          if (Option.isSome(head)) waiting.push({ flow, group, head: { ...head.value.record, body: null }, stored: head.value })
        }
        // The heads the domain's own rotation takes, `limit` deep.
        return rotate(waiting, limit, clock.ticket).map(({ candidate: { flow, group, stored } }): Candidate => ({
          flow,
          group,
          head: toRecord(stored)
        }))
      }),
    events: (ids) => Effect.sync(() => ids.flatMap((id) => Option.toArray(eventById(id)))),
    identities: (ids) =>
      Effect.sync(() =>
        ids.flatMap((id): ReadonlyArray<StoredIdentity & { readonly eventId: EventId }> =>
          Option.match(HashMap.get(current().events, id), {
            onSome: ({ bodyText, record }) => [{ eventId: record.eventId, flowId: record.flowId, seq: record.seq, bodyText }],
            onNone: () =>
              Option.toArray(HashMap.get(current().dedup, id)).map((d) => ({
                eventId: d.eventId,
                flowId: d.flowId,
                seq: d.seq,
                bodyText: null,
                bodyHash: d.bodyHash
              }))
          })
        )
      ),
    eventsAt: (positions) => Effect.sync(() => positions.flatMap((p) => Option.toArray(eventAt(p.flowId, p.seq)))),
    flows: (ids) => Effect.sync(() => ids.flatMap((id) => Option.toArray(HashMap.get(current().flows, id)))),
    groups: (ids) =>
      Effect.sync(() =>
        ids.flatMap((id) =>
          Option.toArray(HashMap.get(current().groups, id)).map((group) => ({
            ...group,
            active: allFlows().some((f) => f.group === id && f.headSeq !== null)
          }))
        )
      ),
    reachingBeyond: (nextAtAfter, leaseAfter) =>
      Effect.sync(() =>
        allEvents().filter((e) =>
          (e.state === "ready" && e.nextAt > nextAtAfter) ||
          (e.state === "inflight" && e.leaseUntil !== null && e.leaseUntil > leaseAfter)
        )
      ),
    listEvents: (query: EventQuery) =>
      Effect.sync(() =>
        allEvents().filter((e) =>
          (query.state === undefined || e.state === query.state) &&
          (query.flowId === undefined || e.flowId === query.flowId) &&
          (query.afterEventId === undefined || compareIds(e.eventId, query.afterEventId) > 0) &&
          (query.afterSeq === undefined || e.seq > query.afterSeq)
        ).sort(query.flowId === undefined ? byEventId : (a, b) => a.seq - b.seq).slice(0, query.limit)
      ),
    listFlows: (query: FlowQuery) =>
      Effect.sync(() => {
        const flows = allFlows().filter((f) => query.group === undefined || f.group === query.group)
        const view = (f: FlowRecord): FlowView => ({ ...f, paused: HashSet.has(current().paused.flows, f.flowId) })
        if (query.order === "id") {
          const after = query.after
          return flows.filter((f) => after === undefined || compareIds(f.flowId, after) > 0).sort(byFlowId).slice(0, query.limit).map(view)
        }
        const after = query.after
        return flows.filter((f) => after === undefined || compareTurn(f, after) > 0).sort(compareTurn).slice(0, query.limit).map(view)
      }),
    listGroups: (query) =>
      Effect.sync(() => {
        const after = query.after
        const flows = allFlows()
        return allGroups()
          .filter((g) => after === undefined || compareIds(g.groupId, after) > 0)
          .sort(byGroupId)
          .slice(0, query.limit)
          .map((g): GroupView => {
            const own = flows.filter((f) => f.group === g.groupId)
            return {
              ...g,
              flows: own.length,
              waiting: own.filter((f) => f.headSeq !== null).length,
              paused: HashSet.has(current().paused.groups, g.groupId)
            }
          })
      }),
    listAudit: (query) =>
      Effect.sync(() => {
        const rows = current().audit.filter((a) => query.eventId === undefined || a.eventId === query.eventId)
        return query.limit === undefined ? rows : rows.slice(0, query.limit)
      }),
    dump: Effect.sync(() => ({
      flows: allFlows().sort(byFlowId),
      groups: allGroups().sort(byGroupId),
      events: allEvents().sort(byPosition),
      audit: current().audit
    })),
    countByState: Effect.sync(() => {
      const byState: Record<EventState, number> = { ready: 0, inflight: 0, acked: 0, quarantined: 0, discarded: 0 }
      let claims = 0
      for (const { record } of HashMap.values(current().events)) {
        byState[record.state] += 1
        claims += record.lifetimeAttempts
      }
      return { byState, claims }
    }),
    quarantinedHeads: (filter, after, limit) =>
      Effect.sync(() => {
        const { flows } = current()
        return allEvents()
          .filter((e) => after === undefined || compareIds(e.eventId, after) > 0)
          .flatMap((event) => {
            const group = Option.match(HashMap.get(flows, event.flowId), { onNone: () => null, onSome: (f) => f.group })
            return matchesRedriveFilter(event, group, filter) ? [{ event, group }] : []
          })
          .sort((a, b) => byEventId(a.event, b.event))
          .slice(0, limit)
      }),
    protocol: Effect.sync(() => current().protocol),
    countPaused: Effect.sync(() => ({ flows: HashSet.size(current().paused.flows), groups: HashSet.size(current().paused.groups) })),
    eligibleHeads: (now) =>
      Effect.sync(() => {
        let count = 0
        let oldest: number | null = null
        const state = current()
        for (const flow of HashMap.values(state.flows)) {
          if (!isWaiting(flow, now) || isPaused(state, flow)) continue
          count += 1
          if (oldest === null || flow.eligibleAt! < oldest) oldest = flow.eligibleAt
        }
        return { count, oldest }
      }),
    pruneCandidates: (cutoff, limit) =>
      Effect.sync(() =>
        [...HashMap.values(current().events)]
          .filter((e) => isSettledForGood(e.record.state) && e.ackedAt !== null && e.ackedAt <= cutoff)
          .sort((a, b) => a.ackedAt! - b.ackedAt! || compareIds(a.record.eventId, b.record.eventId))
          .slice(0, limit)
          .map(({ ackedAt, bodyText, record }): PruneCandidate => ({
            eventId: record.eventId,
            flowId: record.flowId,
            seq: record.seq,
            state: record.state,
            ackedAt,
            bodyText
          }))
      ),
    countPrunable: (eventCutoff, dedupCutoff, limit) =>
      Effect.sync(() => {
        let events = 0
        let dedup = 0
        if (eventCutoff !== null) {
          for (const e of HashMap.values(current().events)) {
            if (isSettledForGood(e.record.state) && e.ackedAt !== null && e.ackedAt <= eventCutoff) events += 1
          }
        }
        if (dedupCutoff !== null) for (const d of HashMap.values(current().dedup)) if (d.prunedAt <= dedupCutoff) dedup += 1
        return { events: Math.min(events, limit), dedup: Math.min(dedup, limit) }
      })
  }
}

/** Reads and writes of one write transaction over its own copy `draft` of the state. */
const writes = (draft: { state: State }): QueueWrites => {
  const change = (f: (state: State) => State) => Effect.sync(() => void (draft.state = f(draft.state)))
  return {
    ...reads(() => draft.state),
    setClock: (clock) => change((s) => ({ ...s, clock })),
    insertEvents: (rows) =>
      Effect.suspend(() => {
        let { events, positions } = draft.state
        for (const { bodyText, record } of rows) {
          const at = positionKey(record)
          if (HashMap.has(events, record.eventId) || HashMap.has(positions, at)) {
            return constraint(`event ${JSON.stringify(record.eventId)} or its flow position is already stored`)
          }
          const { body: _body, ...kept } = record
          events = HashMap.set(events, record.eventId, { record: kept, bodyText, ackedAt: null })
          positions = HashMap.set(positions, at, record.eventId)
        }
        return change((s) => ({ ...s, events, positions }))
      }),
    // Id, flow, seq and body never change: only the mutable fields are taken, as the SQL UPDATE does.
    updateEvents: (records, acked = []) =>
      change((s) => {
        let events = s.events
        for (const r of records) {
          events = HashMap.modify(events, r.eventId, ({ ackedAt, bodyText, record }) => ({
            bodyText,
            ackedAt,
            record: {
              ...record,
              state: r.state,
              nextAt: r.nextAt,
              leaseUntil: r.leaseUntil,
              generation: r.generation,
              attempts: r.attempts,
              lifetimeAttempts: r.lifetimeAttempts,
              reason: r.reason
            }
          }))
        }
        for (const { ackedAt, eventId } of acked) events = HashMap.modify(events, eventId, (e) => ({ ...e, ackedAt }))
        return { ...s, events }
      }),
    putGroups: (records) =>
      change((s) => ({ ...s, groups: records.reduce((groups, g) => HashMap.set(groups, g.groupId, g), s.groups) })),
    putFlows: (records) =>
      change((s) => ({ ...s, flows: records.reduce((flows, f) => HashMap.set(flows, f.flowId, withStoredResume(f, HashMap.get(flows, f.flowId))), s.flows) })),
    setResume: (flowId, resume) => change((s) => ({ ...s, flows: HashMap.modify(s.flows, flowId, (f) => ({ ...f, resume })) })),
    setHeads: (heads) =>
      change((s) => ({
        ...s,
        flows: heads.reduce(
          (flows, h) => HashMap.modify(flows, h.flowId, (f) => ({ ...f, headSeq: h.headSeq, eligibleAt: h.eligibleAt })),
          s.flows
        )
      })),
    setProtocol: (protocol) => change((s) => ({ ...s, protocol })),
    appendAudit: (record) => change((s) => ({ ...s, audit: [...s.audit, record] })),
    setPaused: (target, paused) =>
      Effect.sync(() => {
        const s = draft.state
        const [kind, id, exists] = "group" in target
          ? ["groups" as const, target.group, HashMap.has(s.groups, target.group)]
          : ["flows" as const, target.flowId, HashMap.has(s.flows, target.flowId)]
        if (!exists) return undefined
        const was = HashSet.has(s.paused[kind], id)
        const set = paused ? HashSet.add(s.paused[kind], id) : HashSet.remove(s.paused[kind], id)
        draft.state = { ...s, paused: { ...s.paused, [kind]: set } }
        return was
      }),
    putDedup: (records) =>
      change((s) => ({ ...s, dedup: records.reduce((dedup, d) => HashMap.set(dedup, d.eventId, d), s.dedup) })),
    deleteAcked: (ids) =>
      Effect.sync(() => {
        let { events, positions } = draft.state
        let deleted = 0
        for (const id of ids) {
          const stored = HashMap.get(events, id)
          if (Option.isNone(stored) || !isSettledForGood(stored.value.record.state)) continue
          events = HashMap.remove(events, id)
          positions = HashMap.remove(positions, positionKey(stored.value.record))
          deleted += 1
        }
        draft.state = { ...draft.state, events, positions }
        return deleted
      }),
    deleteDedup: (cutoff, limit) =>
      Effect.sync(() => {
        const due = [...HashMap.values(draft.state.dedup)]
          .filter((d) => d.prunedAt <= cutoff)
          .sort((a, b) => a.prunedAt - b.prunedAt || compareIds(a.eventId, b.eventId))
          .slice(0, limit)
        draft.state = { ...draft.state, dedup: due.reduce((dedup, d) => HashMap.remove(dedup, d.eventId), draft.state.dedup) }
        return due.length
      })
  }
}

/** A new, empty queue store in memory. */
export const backend: Effect.Effect<QueueBackend> = Effect.map(Effect.makeSemaphore(1), (permit) => {
  let committed = empty
  return {
    write: (body, beforeCommit) =>
      permit.withPermits(1)(
        Effect.suspend(() => {
          const draft = { state: committed }
          return body(writes(draft)).pipe(
            Effect.zipLeft(beforeCommit ?? Effect.void),
            // The commit is one synchronous step: it happens whole or, interrupted or failed before it, not at all.
            Effect.tap(() => Effect.sync(() => void (committed = draft.state)))
          )
        })
      ),
    read: (body) =>
      Effect.suspend(() => {
        const state = committed
        return body(reads(() => state))
      })
  }
})
