/**
 * The queue (`RelayQueue.make`) over any backend: each operation checks its input, runs in one
 * transaction of the backend, reads what it needs, lets the domain's `Operations` decide, and
 * stores the changes decided; a local wake-up tells this process's sleeping workers of new work.
 *
 * The generators an operation runs are made once (`Effect.fnUntraced`, at module load or in
 * `make`) and take what they use as arguments, never a `function*` made afresh in each call: V8
 * gives every new generator function an old-generation map that keeps all it captures alive
 * until the next full collection.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Either, Metric, PubSub, Random, Stream } from "effect"
import type { Context } from "effect"
import type { ClockRegressed } from "../../domain/Errors.js"
import { EventNotFound as NotFound, InvalidInput, TargetNotFound } from "../../domain/Errors.js"
import type { EventId, FlowId, GroupId } from "../../domain/Ids.js"
import * as Operations from "../../domain/Operations.js"
import * as Operator from "../../domain/Operator.js"
import type { Changes } from "../../domain/Operations.js"
import type { NotableChange } from "../../domain/Notable.js"
import type { ClaimOutcome, DeliveryReply, EnqueueResult, SettleOutcome } from "../../domain/Outcomes.js"
import { makePolicy, protocolKeys, protocolOf, retentionKeys } from "../../domain/Policy.js"
import type { PolicyKey, RelayPolicy } from "../../domain/Policy.js"
import * as Protocol from "../../domain/Protocol.js"
import type { AuditRecord, ClockRecord, EventRecord, Snapshot, Token } from "../../domain/Records.js"
import * as Faults from "../Faults.js"
import * as Metrics from "../Metrics.js"
import type { Operations as QueueOperations, QuarantinedHead, QueueBackend, QueueReads, QueueWrites, StoredProtocol } from "../QueueBackend.js"
import * as Input from "../QueueInput.js"
import * as Retention from "../Retention.js"
import type { ClaimBatch, DiscardInput, PauseInput, PauseResult, RedriveAllInput, RedrivenHead, RedriveInput, SetPolicyInput, RelayQueueService, ResetClockInput, SettledAndClaimed } from "../RelayQueue.js"

/**
 * Wakes this process's sleeping workers when work arrives through this queue instance (an
 * enqueue, a redrive, an ack that exposes the next head). Other processes poll. A watch taken
 * before a claim also completes for a signal that came before its wait began.
 */
const makeWake = () => {
  let signals = 0
  let waiters: Array<() => void> = []
  const after = (seen: number) =>
    Effect.async<void>((resume) => {
      if (signals > seen) return resume(Effect.void)
      const waiter = () => resume(Effect.void)
      waiters.push(waiter)
      return Effect.sync(() => {
        waiters = waiters.filter((w) => w !== waiter)
      })
    })
  const watch = Effect.sync(() => after(signals))
  const unsafeSignal = () => {
    signals++
    const woken = waiters
    waiters = []
    for (const resume of woken) resume()
  }
  return {
    unsafeSignal,
    signal: Effect.sync(unsafeSignal),
    watch,
    await: Effect.flatten(watch)
  }
}

/** What a claim decided: the batch, and the group of each claimed flow that has one (for metrics). */
interface Decided extends ClaimBatch {
  readonly groups: ReadonlyArray<string>
}

const claimed = (claims: ClaimBatch["claims"], wakeAt: number | undefined, groups: ReadonlyArray<string> = []): Decided =>
  wakeAt === undefined ? { claims, groups } : { claims, wakeAt, groups }

const unique = <A>(values: ReadonlyArray<A>): ReadonlyArray<A> => [...new Set(values)]

const byKey = <A, K>(rows: ReadonlyArray<A>, key: (row: A) => K): ReadonlyMap<K, A> => new Map(rows.map((row) => [key(row), row]))

/** The audit row of an operator's action at `tick`: on an event (at its generation after it), or on `target` alone. */
const auditRow = (
  action: AuditRecord["action"],
  tick: number,
  request: { readonly reason: string; readonly actor?: string | null | undefined },
  event: Pick<EventRecord, "eventId" | "generation"> | null,
  target: string | null = null
): AuditRecord => ({ eventId: event?.eventId ?? null, reason: request.reason, generation: event?.generation ?? null, tick, actor: request.actor ?? null, action, target })

/**
 * Stores what an operation decided, in the operation's transaction. The clock goes first: a
 * backend that draws tickets from a sequence draws them there, before the flows that took them.
 */
const store = Effect.fnUntraced(function*(tx: QueueWrites, changes: Changes, ungroupedHeads = false) {
  if (changes.clock !== undefined) yield* tx.setClock(changes.clock)
  if (changes.inserted.length > 0) yield* tx.insertEvents(changes.inserted)
  if (changes.events.length > 0) yield* tx.updateEvents(changes.events, changes.acked)
  if (changes.groups.length > 0) yield* tx.putGroups(changes.groups)
  if (changes.flows.length > 0) yield* tx.putFlows(changes.flows)
  if (changes.heads.length > 0) yield* tx.setHeads(changes.heads, ungroupedHeads)
})

/** What a write operation decides in its transaction, given the clock and the time it holds. */
type Decide<A, E> = (tx: QueueWrites, clock: ClockRecord, now: number) => Effect.Effect<readonly [A, Changes], E | SqlError>

interface FaultPoints {
  readonly before: Faults.FaultPoint
  readonly after: Faults.FaultPoint
}

const claimFaults: FaultPoints = { before: "claim:before-commit", after: "claim:after-commit" }
const settleFaults: FaultPoints = { before: "settle:before-commit", after: "settle:after-commit" }

/**
 * The queue over a backend: validation, the clock check, the protocol's decisions, metrics,
 * wake-ups and spans — the same for every backend.
 */
export const make = (
  backend: QueueBackend,
  initial: RelayPolicy,
  initialRetention: Retention.Retention = Retention.defaultRetention
): RelayQueueService => {
  // The policy every decision reads: the store's protocol settings may change while this runs
  // (`setPolicy` here, or in another process: `refreshPolicy` adopts them).
  let policy = initial
  // The layer's retention until the store keeps one; then the store's, as the protocol settings.
  let retention = initialRetention
  let policyVersion: number | undefined
  const wake = makeWake()
  // The hot operations, where the backend runs them whole.
  const hot = backend.operations
  // Notable changes made through this instance, told once committed. Unbounded: publishing never
  // waits for a slow subscriber, and with no subscriber a change is dropped at once.
  const notable = Effect.runSync(PubSub.unbounded<NotableChange>())
  const tell = (change: NotableChange) => PubSub.publish(notable, change)
  const localTime = Effect.clockWith((clock) => clock.currentTimeMillis)
  // The store's clock when it offers one (one time line for every host), else the caller's.
  const timeOf = (tx: QueueReads) => tx.now ?? localTime

  /**
   * `run` of the operation, with its fault points around the commit where a test installed them:
   * `run(beforeCommit)` runs `beforeCommit` last inside its transaction.
   */
  const bracket = <A, E>(
    faults: ReadonlyArray<FaultPoints>,
    run: (beforeCommit?: Effect.Effect<void>) => Effect.Effect<A, E>
  ): Effect.Effect<A, E> => {
    if (faults.length === 0) return run()
    const pass = (installed: Context.Tag.Service<Faults.Faults>, point: (faults: FaultPoints) => Faults.FaultPoint) =>
      Effect.forEach(faults, (f) => installed.hit(point(f)), { discard: true })
    return Faults.whenInstalled(run(), (installed) => Effect.tap(run(pass(installed, (f) => f.before)), () => pass(installed, (f) => f.after)))
  }

  /**
   * One write operation in one transaction: reads the time once the write lock is ours (a time
   * read before waiting for it would be older than what the previous holder stored) and after the
   * stored clock, checks it against the persisted tick, lets `decide` read and decide, and stores
   * its changes. Fault points bracket the commit when the operation names them.
   */
  const write = <A, E>(
    decide: Decide<A, E>,
    faults: ReadonlyArray<FaultPoints> = [],
    joining = false
  ): Effect.Effect<A, E | ClockRegressed | SqlError> => {
    // An enqueue joins the caller's transaction on a store that shares the application's database.
    const { join } = backend
    const body = (tx: QueueWrites) => writeBody(decide, tx)
    return bracket(faults, (beforeCommit) => (joining && join !== undefined ? join(body) : backend.write(body, beforeCommit)))
  }

  /** What a write operation runs in its transaction (`write`). */
  const writeBody = Effect.fnUntraced(function*<A, E>(decide: Decide<A, E>, tx: QueueWrites) {
    // The stored clock first, then the time: a write that committed a later tick before this
    // read did so before this time is read (writers that run side by side, one server clock).
    const stored = yield* tx.clock
    const now = yield* timeOf(tx)
    const checked = Protocol.advanceClock(stored, now, policy.clock)
    if (Either.isLeft(checked)) return yield* Effect.fail(checked.left)
    if (checked.right.regressed) yield* Metric.increment(Metrics.clockClamped)
    const [value, changes] = yield* decide(tx, checked.right.clock, now)
    yield* store(tx, changes)
    return value
  })

  const decideEnqueue = Effect.fnUntraced(
    function*(commands: ReadonlyArray<Operations.EnqueueCommand>, tx: QueueWrites, clock: ClockRecord, now: number) {
      // Flows first: a backend that locks rows holds them before it reads what is stored.
      const flows = yield* tx.flows(unique(commands.map((c) => c.flowId)))
      // The groups named, and those of the flows: a flow that gets a head again may re-admit its group.
      const named = unique([...commands.flatMap((c) => c.group ?? []), ...flows.flatMap((f) => f.group ?? [])])
      const groups = named.length === 0 ? [] : yield* tx.groups(named)
      const identities = yield* tx.identities(unique(commands.map((c) => c.eventId)))
      const decided = Operations.enqueue(
        commands,
        byKey(identities, (row): string => row.eventId),
        byKey(flows, (row): string => row.flowId),
        byKey(groups, (row): string => row.groupId),
        clock,
        now,
        policy,
        Retention.hashBody
      )
      if (Either.isLeft(decided)) return yield* Effect.fail(decided.left)
      return [decided.right.results, decided.right.changes] as const
    }
  )

  const countEnqueued = (results: ReadonlyArray<EnqueueResult>) => {
    const added = results.filter((r) => r._tag === "Enqueued").length
    if (added === 0) return Effect.void
    return Metrics.record((update) => {
      update(Metrics.enqueued, added)
      wake.unsafeSignal()
    })
  }

  const countClamped = (clamped: boolean) => (clamped ? Metric.increment(Metrics.clockClamped) : Effect.void)

  const enqueueAll = (commands: ReadonlyArray<Operations.EnqueueCommand>) =>
    (hot === undefined
      ? write((tx, clock, now) => decideEnqueue(commands, tx, clock, now), [], true)
      : Effect.flatMap(hot.enqueue(commands, policy), ({ clamped, results }) => Effect.as(countClamped(clamped), results))
    ).pipe(Effect.tap(countEnqueued))

  /** A claim's decision: up to `limit` eligible heads in turn order, or when to look again. */
  const claimDecision = Effect.fnUntraced(function*(limit: number, tx: QueueWrites, clock: ClockRecord, now: number) {
    // The candidates first (a backend answers none at once when no head is eligible): a claim
    // that finds heads reads once, an idle one reads again for when to wake.
    const candidates = yield* tx.candidates(now, limit)
    if (candidates.length === 0) return [yield* idle(yield* tx.wakeAt, now), Operations.noChanges] as const
    const decided = Operations.claim(candidates, clock, now, policy, limit)
    if (decided === undefined) return yield* Effect.dieMessage("a flow caches a head that is not eligible")
    const groups = decided.changes.flows.flatMap((f) => (f.group === null ? [] : [f.group]))
    return [claimed(decided.claims, undefined, groups), decided.changes] as const
  })

  /** A claim that found no head: when to look again (`wakeAt`, the least `eligibleAt` a claim may take, null: none). */
  const idle = (wakeAt: number | null, now: number): Effect.Effect<Decided> => {
    if (wakeAt === null || wakeAt > now) return Effect.succeed(claimed([], wakeAt ?? undefined))
    // Heads are eligible but other writers hold every one of them (a backend that claims in
    // parallel): not idle — try again at once rather than after the poll interval.
    return Effect.as(Metric.increment(Metrics.contendedClaims), claimed([], now + 1))
  }

  const countClaims = (update: Metrics.Update, { claims, groups }: Decided) => {
    if (claims.length === 0) {
      update(Metrics.idleClaims, 1)
      return
    }
    update(Metrics.claims, claims.length)
    if (groups.length > 0) Metrics.countGroupClaims(update, groups)
  }

  const claimBatchOf = ({ claims, wakeAt }: Decided): ClaimBatch => (wakeAt === undefined ? { claims } : { claims, wakeAt })

  /** One random draw per reply where the policy's jitter needs them. */
  const drawsFor = (items: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<number>> =>
    policy.jitter === "full" ? Effect.forEach(items, () => Random.next) : Effect.succeed([])

  /**
   * Settles `items` and then claims up to `limit` heads in one transaction of a backend that runs
   * them whole (`QueueBackend.operations`): the outcomes, the claim's decision, the quarantined heads.
   */
  const stepOn = (hot: QueueOperations, items: ReadonlyArray<readonly [Token, DeliveryReply]>, limit: number, faults: ReadonlyArray<FaultPoints>) =>
    Effect.flatMap(drawsFor(items), (draws) =>
      bracket(faults, (beforeCommit) => hot.step(items.map(([token, reply], i) => ({ token, verdict: Protocol.boundedVerdict(reply), draw: draws[i] ?? 1 })), limit, policy, beforeCommit))).pipe(
        Effect.flatMap((stepped) =>
          Effect.zipRight(
            countClamped(stepped.clamped),
            stepped.claims.length > 0 || limit === 0
              ? Effect.succeed([stepped, claimed(stepped.claims, undefined, stepped.groups)] as const)
              : Effect.map(idle(stepped.wakeAt, stepped.now), (decided) => [stepped, decided] as const)
          ))
      )

  const claimUpTo = (limit: number): Effect.Effect<ClaimBatch, ClockRegressed | SqlError> =>
    (hot === undefined
      ? write((tx, clock, now) => claimDecision(limit, tx, clock, now), [claimFaults])
      : Effect.map(stepOn(hot, [], limit, [claimFaults]), ([, decided]) => decided)
    ).pipe(Effect.flatMap((decided) => Metrics.recordThen((update) => countClaims(update, decided), claimBatchOf(decided))))

  const claim: Effect.Effect<ClaimOutcome, ClockRegressed | SqlError> = claimUpTo(1).pipe(
    Effect.map(({ claims, wakeAt }): ClaimOutcome => claims[0] ?? (wakeAt === undefined ? { _tag: "Idle" } : { _tag: "Idle", wakeAt })),
    Effect.tap((outcome) =>
      Metrics.annotateHotSpan(() =>
        outcome._tag === "Claimed"
          ? { eventId: outcome.event.eventId, flowId: outcome.event.flowId, generation: outcome.token.generation }
          : { idle: true }
      )
    ),
    Metrics.withHotSpan("RelayQueue.claim")
  )

  /** A settle's decision: one outcome per reply, in order; its changes; the events it quarantined. */
  const settleDecision = Effect.fnUntraced(function*(
    items: ReadonlyArray<readonly [Token, DeliveryReply]>,
    tx: QueueWrites,
    clock: ClockRecord,
    now: number
  ) {
    const draws = yield* drawsFor(items)
    const ids = unique(items.map(([token]) => token.eventId))
    // With the event after each where the backend reads them together (a store-wide write lock).
    const { events, next } = tx.eventsWithNext === undefined
      ? { events: yield* tx.events(ids), next: undefined }
      : yield* tx.eventsWithNext(ids)
    const { acked: stamps, changed, outcomes } = Operations.settle(items, byKey(events, (e): string => e.eventId), now, policy, draws)
    const acked = changed.filter((e) => e.state === "acked")
    const successors = acked.length === 0
      ? []
      : next ?? (yield* tx.eventsAt(acked.map((e) => ({ flowId: e.flowId, seq: e.seq + 1 }))))
    const changes = Operations.settleChanges(changed, byKey(successors, Operations.positionKey), clock, stamps)
    // Only a settle can quarantine, and only the events it changed were quarantined by it.
    const quarantined = changed.filter((e) => e.state === "quarantined").map((e): QuarantinedHead => ({
      _tag: "Quarantined",
      eventId: e.eventId,
      flowId: e.flowId,
      group: null,
      reason: e.reason ?? "",
      generation: e.generation
    }))
    return { outcomes, changes, quarantined }
  })

  /**
   * Tells the quarantines a settle committed, with each flow's group, and counts them by group.
   * Where the backend did not answer the groups, they are read after the commit (a quarantine is
   * rare; the settle's own reads stay as they are). The settle has committed whatever this read
   * does: when it fails, the change is told without the group rather than not at all.
   */
  const tellQuarantined = (heads: ReadonlyArray<QuarantinedHead>, grouped: boolean) =>
    (grouped ? Effect.succeed(heads) : backend.read((tx) => tx.flows(unique(heads.map((e) => e.flowId)))).pipe(
      Effect.catchAllCause((cause) => Effect.as(Effect.logWarning("reading the groups of quarantined flows failed", cause), [])),
      Effect.map((flows) => {
        const groups = new Map<string, GroupId | null>(flows.map((f) => [f.flowId, f.group]))
        return heads.map((head) => ({ ...head, group: groups.get(head.flowId) ?? null }))
      })
    )).pipe(
      Effect.flatMap((told) =>
        Effect.forEach(told, (head) =>
          Effect.zipRight(
            head.group === null ? Effect.void : Metric.increment(Metric.tagged(Metrics.groupQuarantines, "group", head.group)),
            tell(head)
          ), { discard: true }))
    )

  // An ack may expose the next head of its flow: sleeping workers look again.
  const countSettles = (update: Metrics.Update, outcomes: ReadonlyArray<SettleOutcome>) => {
    // One update per kind of outcome (a single settle has one), not one per outcome.
    const byTag = new Map<SettleOutcome["_tag"], number>()
    for (const outcome of outcomes) byTag.set(outcome._tag, (byTag.get(outcome._tag) ?? 0) + 1)
    for (const [tag, n] of byTag) update(Metrics.settlesByOutcome[tag], n)
    if (byTag.has("Acked")) wake.unsafeSignal()
  }

  /** The settle's answer told: its counts, and its quarantines. */
  const settled = <A>(outcomes: ReadonlyArray<SettleOutcome>, quarantined: ReadonlyArray<QuarantinedHead>, grouped: boolean, answer: A, count?: (update: Metrics.Update) => void) => {
    const counted = Metrics.recordThen((update) => {
      countSettles(update, outcomes)
      count?.(update)
    }, answer)
    return quarantined.length === 0 ? counted : Effect.zipLeft(counted, tellQuarantined(quarantined, grouped))
  }

  const settleAll = (items: ReadonlyArray<readonly [Token, DeliveryReply]>) =>
    hot === undefined
      ? write((tx, clock, now) =>
        Effect.map(settleDecision(items, tx, clock, now), ({ changes, outcomes, quarantined }) => [{ outcomes, quarantined }, changes] as const), [
        settleFaults
      ]).pipe(Effect.flatMap(({ outcomes, quarantined }) => settled(outcomes, quarantined, false, outcomes)))
      : Effect.flatMap(stepOn(hot, items, 0, [settleFaults]), ([{ outcomes, quarantined }]) => settled(outcomes, quarantined, true, outcomes))

  /** `settleAndClaim`'s decision: the settle's, then the claim's on what the settle stored. */
  const exchangeDecision = Effect.fnUntraced(function*(
    items: ReadonlyArray<readonly [Token, DeliveryReply]>,
    limit: number,
    tx: QueueWrites,
    clock: ClockRecord,
    now: number
  ) {
    const { changes: settleChanges, outcomes, quarantined } = yield* settleDecision(items, tx, clock, now)
    // The settle's clock is stored once, with the claim's (which starts from it): the claim reads
    // no clock from the store, and a clock row written twice is a row version more.
    yield* store(tx, { ...settleChanges, clock: undefined })
    // Idle after the settle, the claim reads when to wake: the settle changed what it would be.
    const [decided, changes] = yield* claimDecision(limit, tx, settleChanges.clock ?? clock, now)
    return [{ outcomes, decided, quarantined }, { ...changes, clock: changes.clock ?? settleChanges.clock }] as const
  })

  /**
   * `settleAll(items)` then `claimUpTo(limit)` in one transaction (one commit instead of two): the
   * claim decides on what the settle stored, its clock included, at the same time.
   */
  const settleAndClaim = (
    items: ReadonlyArray<readonly [Token, DeliveryReply]>,
    limit: number
  ): Effect.Effect<SettledAndClaimed, ClockRegressed | SqlError> => {
    if (items.length === 0) {
      return limit === 0 ? Effect.succeed({ outcomes: [], claims: [] }) : Effect.map(claimUpTo(limit), (batch) => ({ outcomes: [], ...batch }))
    }
    if (limit === 0) return Effect.map(settleAll(items), (outcomes) => ({ outcomes, claims: [] }))
    const done = (outcomes: ReadonlyArray<SettleOutcome>, decided: Decided, quarantined: ReadonlyArray<QuarantinedHead>, grouped: boolean) =>
      settled(outcomes, quarantined, grouped, { outcomes, ...claimBatchOf(decided) }, (update) => countClaims(update, decided))
    return hot === undefined
      ? Effect.flatMap(
        write((tx, clock, now) => exchangeDecision(items, limit, tx, clock, now), [settleFaults, claimFaults]),
        ({ decided, outcomes, quarantined }) => done(outcomes, decided, quarantined, false)
      )
      : Effect.flatMap(stepOn(hot, items, limit, [settleFaults, claimFaults]), ([{ outcomes, quarantined }, decided]) => done(outcomes, decided, quarantined, true))
  }

  const redrive = (input: RedriveInput) =>
    Effect.flatMap(Input.decodeRedrive(input), (request) =>
      write((tx, clock, now) =>
        Effect.gen(function*() {
          const [event] = yield* tx.events([request.eventId])
          const next = Protocol.redriveEvent(event, request, now)
          if (Either.isLeft(next)) return yield* Effect.fail(next.left)
          yield* tx.appendAudit(auditRow("redrive", clock.tick, request, next.right))
          const changes: Changes = { ...Operations.noChanges, events: [next.right], heads: [Operations.headAfter(next.right, undefined)], clock }
          return [next.right, changes] as const
        })
      ).pipe(
        Effect.tap((event) =>
          Effect.zipRight(
            Effect.zipRight(Metric.increment(Metrics.redrives), wake.signal),
            tell({ _tag: "Redriven", eventId: event.eventId, flowId: event.flowId, generation: event.generation, reason: request.reason, actor: request.actor ?? null })
          )
        ),
        Effect.map((event) => ({ _tag: "Redriven", generation: event.generation }) as const)
      )).pipe(Effect.withSpan("RelayQueue.redrive"))

  /** A head a redrive reopened, with its ids as the store keeps them. */
  interface Redriven extends RedrivenHead {
    readonly eventId: EventId
    readonly flowId: FlowId
  }

  /** What one page of a bulk redrive did: the heads redriven, how many it read, and the last id it read (undefined: none left). */
  interface RedrivePage {
    readonly heads: ReadonlyArray<Redriven>
    readonly read: number
    readonly last: EventId | undefined
  }

  /** One page of a bulk redrive, in one transaction: the matching heads after `after`, each redriven at the generation read. */
  const redrivePage = (
    filter: Operator.RedriveFilter,
    after: EventId | undefined,
    request: { readonly reason: string; readonly actor: string | null; readonly pageSize: number; readonly target: string }
  ) =>
    write<RedrivePage, never>((tx, clock, now) =>
      Effect.gen(function*() {
        const matched = yield* tx.quarantinedHeads(filter, after, request.pageSize)
        if (matched.length === 0) return [{ heads: [], read: 0, last: undefined }, Operations.noChanges] as const
        // Read again where a backend holds what it reads (side by side, the events and their flows are locked here).
        const current = byKey(yield* tx.events(matched.map((m) => m.event.eventId)), (e): string => e.eventId)
        const heads: Array<Redriven> = []
        const events: Array<EventRecord> = []
        for (const { event, group } of matched) {
          const next = Protocol.redriveEvent(current.get(event.eventId), { eventId: event.eventId, expectedGeneration: event.generation, reason: request.reason }, now)
          if (Either.isLeft(next)) continue
          events.push(next.right)
          heads.push({ eventId: event.eventId, flowId: event.flowId, group, reason: event.reason, generation: next.right.generation })
          yield* tx.appendAudit(auditRow("redrive", clock.tick, request, next.right, request.target))
        }
        const changes: Changes = events.length === 0
          ? Operations.noChanges
          : { ...Operations.noChanges, events, heads: events.map((e) => Operations.headAfter(e, undefined)), clock }
        return [{ heads, read: matched.length, last: matched[matched.length - 1]!.event.eventId }, changes] as const
      })
    )

  const redriveAll = (input: RedriveAllInput) =>
    Effect.flatMap(Input.decodeRedriveAll(input), (request) =>
      Effect.gen(function*() {
        const { all: _all, ...filter } = request.filter
        const pageSize = request.pageSize ?? Operator.RedrivePageSize
        const onPage = input.onPage ?? (() => Effect.void)
        const heads: Array<RedrivenHead> = []
        let skipped = 0
        let pages = 0
        let after: EventId | undefined
        for (;;) {
          if (request.dryRun === true) {
            const matched = yield* backend.read((tx) => tx.quarantinedHeads(filter, after, pageSize))
            if (matched.length === 0) break
            const page = matched.map(({ event, group }): RedrivenHead => ({ eventId: event.eventId, flowId: event.flowId, group, reason: event.reason, generation: event.generation }))
            heads.push(...page)
            pages++
            yield* onPage(page)
            after = matched[matched.length - 1]!.event.eventId
            continue
          }
          const page = yield* redrivePage(filter, after, {
            reason: request.reason,
            actor: request.actor ?? null,
            pageSize,
            target: `bulk:${JSON.stringify(request.filter)}`
          })
          if (page.last === undefined) break
          heads.push(...page.heads)
          skipped += page.read - page.heads.length
          pages++
          if (page.heads.length > 0) {
            yield* Metric.incrementBy(Metrics.redrives, page.heads.length).pipe(Effect.zipRight(wake.signal))
            yield* PubSub.publishAll(notable, page.heads.map((head): NotableChange => ({
              _tag: "Redriven",
              eventId: head.eventId,
              flowId: head.flowId,
              generation: head.generation,
              reason: request.reason,
              actor: request.actor ?? null
            })))
          }
          yield* onPage(page.heads)
          after = page.last
        }
        return { dryRun: request.dryRun === true, heads, skipped, pages }
      })).pipe(Effect.withSpan("RelayQueue.redriveAll"))

  const discard = (input: DiscardInput) =>
    Effect.flatMap(Input.decodeDiscard(input), (request) =>
      write((tx, clock, now) =>
        Effect.gen(function*() {
          const [event] = yield* tx.events([request.eventId])
          const decided = Operator.discardEvent(event, request)
          if (Either.isLeft(decided)) return yield* Effect.fail(decided.left)
          const discarded = decided.right
          // Read after the event (and, side by side, its flow) is held: nothing is appended meanwhile.
          const [successor] = yield* tx.eventsAt([{ flowId: discarded.flowId, seq: discarded.seq + 1 }])
          // The next event's delivery names the last seq before the discarded run (`Claimed.previousSeq`).
          const [flow] = yield* tx.flows([discarded.flowId])
          yield* tx.setResume(discarded.flowId, Operator.resumeAfterDiscard(flow?.resume, discarded.seq))
          yield* tx.appendAudit(auditRow("discard", clock.tick, request, discarded))
          const changes: Changes = {
            ...Operations.noChanges,
            events: [discarded],
            acked: [{ eventId: discarded.eventId, ackedAt: now }],
            heads: [Operations.headAfter(discarded, successor)],
            clock
          }
          return [{ _tag: "Discarded", generation: discarded.generation, nextHead: successor?.eventId ?? null, flowId: discarded.flowId } as const, changes] as const
        })
      ).pipe(
        Effect.tap(({ flowId, generation }) =>
          Effect.zipRight(
            Effect.zipRight(Metric.increment(Metrics.discards), wake.signal),
            tell({ _tag: "Discarded", eventId: request.eventId, flowId, generation, reason: request.reason, actor: request.actor ?? null })
          )
        ),
        Effect.map(({ _tag, generation, nextHead }) => ({ _tag, generation, nextHead }))
      )).pipe(Effect.withSpan("RelayQueue.discard"))

  const setPaused = (input: PauseInput, paused: boolean) => {
    const operation = paused ? "pause" : "resume"
    return Effect.flatMap(Input.decodePause(input, operation), (request) =>
      write((tx, clock) =>
        Effect.gen(function*() {
          const target = "group" in request
            ? { kind: "group" as const, id: request.group }
            : { kind: "flow" as const, id: request.flowId }
          const was = yield* tx.setPaused("group" in request ? { group: request.group } : { flowId: request.flowId }, paused)
          if (was === undefined) return yield* Effect.fail(new TargetNotFound(target))
          yield* tx.appendAudit(auditRow(operation, clock.tick, request, null, `${target.kind}:${target.id}`))
          const result: PauseResult = { _tag: paused ? "Paused" : "Resumed", target, changed: was !== paused }
          // The audit row is a write: the stored tick reaches the tick it records, so the audit stays in tick order.
          return [result, { ...Operations.noChanges, clock }] as const
        })
      ).pipe(
        Effect.tap((result) =>
          result.changed ? tell({ _tag: result._tag, target: result.target, reason: request.reason, actor: request.actor ?? null }) : Effect.void
        )
      )).pipe(
        Effect.tap(() => (paused ? Effect.void : wake.signal)),
        Effect.withSpan(paused ? "RelayQueue.pause" : "RelayQueue.resume")
      )
  }

  /** Adopts `stored` when it is newer than what this instance runs. */
  const adopt = (stored: StoredProtocol | undefined): RelayPolicy => {
    if (stored !== undefined && (policyVersion === undefined || stored.version > policyVersion)) {
      policy = { ...policy, ...stored.settings }
      if (stored.retention !== undefined) retention = stored.retention
      policyVersion = stored.version
    }
    return policy
  }

  const refreshPolicy: Effect.Effect<RelayPolicy, SqlError> = backend.read((tx) =>
    tx.protocol === undefined ? Effect.succeed(policy) : Effect.map(tx.protocol, adopt)
  ).pipe(Effect.withSpan("RelayQueue.refreshPolicy"))

  const setPolicy = (input: SetPolicyInput) =>
    Effect.flatMap(Input.decodeSetPolicy(input, policy), (request) =>
      write((tx, clock) =>
        Effect.gen(function*() {
          if (tx.protocol === undefined || tx.setProtocol === undefined) {
            return yield* Effect.fail(new InvalidInput({ operation: "setPolicy", message: "this store keeps no policy to change" }))
          }
          const stored: StoredProtocol = (yield* tx.protocol) ?? { settings: protocolOf(policy), version: 0 }
          // The named settings over the store's own, checked together.
          const merged = makePolicy(request.named, { ...policy, ...stored.settings })
          if (Either.isLeft(merged)) return yield* Effect.fail(new InvalidInput({ operation: "setPolicy", message: merged.left }))
          const settings = protocolOf(merged.right)
          const was = stored.retention ?? retention
          const kept = request.retention === undefined ? stored.retention : { ...was, ...request.retention }
          const windows = { "retention.acked": [was.acked, kept?.acked], "retention.dedup": [was.dedup, kept?.dedup] } as const
          const changed: ReadonlyArray<PolicyKey> = [
            ...protocolKeys.filter((key) => settings[key] !== stored.settings[key]),
            ...retentionKeys.filter((key) => request.retention !== undefined && windows[key][0] !== windows[key][1])
          ]
          const next: StoredProtocol = { settings, retention: kept, version: stored.version + 1 }
          const valueOf = (key: PolicyKey) => key === "retention.acked" || key === "retention.dedup" ? windows[key][1] : settings[key]
          if (changed.length > 0) {
            yield* tx.setProtocol(next)
            yield* tx.appendAudit(auditRow("policy", clock.tick, request, null, JSON.stringify(Object.fromEntries(changed.map((key) => [key, valueOf(key)])))))
          }
          return [{ changed, policy: changed.length > 0 ? next : stored }, Operations.noChanges] as const
        })
      ).pipe(
        Effect.tap(({ changed, policy: stored }) =>
          changed.length === 0 ? Effect.void : tell({
            _tag: "PolicyChanged",
            changed,
            settings: stored.settings,
            ...(stored.retention === undefined ? {} : { retention: stored.retention }),
            version: stored.version,
            reason: request.reason,
            actor: request.actor ?? null
          })
        )
      )).pipe(
        Effect.map(({ changed, policy: stored }) => {
          const adopted = adopt(stored)
          return { changed, policy: adopted, retention, version: stored.version }
        }),
        Effect.withSpan("RelayQueue.setPolicy")
      )

  const resetClock = (input: ResetClockInput) =>
    Effect.flatMap(Input.decodeResetClock(input), ({ actor, reason }) =>
      backend.write((tx) =>
        Effect.gen(function*() {
          if (tx.lockStore !== undefined) yield* tx.lockStore
          const now = yield* timeOf(tx)
          const before = yield* tx.clock
          const adjusted = (yield* tx.reachingBeyond(now + policy.backoffCap, now + policy.leaseTicks))
            .flatMap((event) => Operations.pullIn(event, now, policy) ?? [])
          const flows = byKey(yield* tx.flows(unique(adjusted.map((e) => e.flowId))), (f): string => f.flowId)
          const heads = adjusted.filter((e) => flows.get(e.flowId)?.headSeq === e.seq)
          yield* store(tx, {
            ...Operations.noChanges,
            events: adjusted,
            heads: heads.map((e) => Operations.headAfter(e, undefined)),
            clock: { ...before, tick: now }
          })
          yield* Effect.logWarning("queue clock reset").pipe(
            Effect.annotateLogs({ before: before.tick, after: now, eventsAdjusted: adjusted.length, reason, actor: actor ?? "" })
          )
          return { before: before.tick, after: now, eventsAdjusted: adjusted.length }
        })
      )).pipe(Effect.withSpan("RelayQueue.resetClock"))

  const snapshot: Effect.Effect<Snapshot, SqlError> = backend.read((tx) =>
    Effect.map(Effect.zip(tx.clock, tx.dump), ([clock, rest]) => ({ clock, ...rest }))
  ).pipe(Effect.withSpan("RelayQueue.snapshot"))

  const stats = backend.read((tx) =>
    Effect.gen(function*() {
      const now = yield* timeOf(tx)
      const eligible = yield* tx.eligibleHeads(now)
      const { byState, claims } = yield* tx.countByState
      const paused = yield* tx.countPaused
      return {
        byState,
        claims,
        eligibleHeads: eligible.count,
        oldestEligibleAgeMillis: eligible.oldest === null ? 0 : Math.max(0, now - eligible.oldest),
        paused,
        clock: yield* tx.clock
      }
    })
  ).pipe(Effect.withSpan("RelayQueue.stats"))

  const inspect = (eventId: string) =>
    Effect.flatMap(Input.decodeEventId(eventId, "inspect"), (id: EventId) =>
      backend.read((tx) =>
        Effect.gen(function*() {
          const [event] = yield* tx.events([id])
          if (event === undefined) return yield* Effect.fail(new NotFound({ eventId: id }))
          return { event, audit: yield* tx.listAudit({ eventId: id }) }
        })
      )).pipe(Effect.withSpan("RelayQueue.inspect"))

  /** A listing: its filter checked (none: every row, in pages), then read in one read transaction. */
  const listing = <Q, A>(
    name: string,
    decode: (filter: unknown) => Effect.Effect<Q, InvalidInput>,
    list: (tx: QueueReads) => (query: Q) => Effect.Effect<A, SqlError>
  ) =>
  (filter: unknown = {}) => Effect.flatMap(decode(filter), (query) => backend.read((tx) => list(tx)(query))).pipe(Effect.withSpan(`RelayQueue.${name}`))

  return {
    get policy() {
      return policy
    },
    refreshPolicy,
    setPolicy,
    enqueue: (input) =>
      Effect.flatMap(Input.decodeEnqueue(input, policy), (command) => Effect.map(enqueueAll([command]), (results) => results[0]!))
        .pipe(Metrics.withHotSpan("RelayQueue.enqueue")),
    enqueueBatch: (inputs) =>
      Effect.flatMap(Input.decodeEnqueueBatch(inputs, policy), enqueueAll).pipe(Metrics.withHotSpan("RelayQueue.enqueueBatch")),
    setFlowWeight: (input) =>
      Effect.flatMap(Input.decodeFlowWeight(input), ({ flowId, weight }) =>
        write((tx, clock) =>
          Effect.map(tx.flows([flowId]), ([flow]) => [undefined, Operations.setWeight(flow, flowId, weight, clock)] as const)
        )).pipe(Effect.withSpan("RelayQueue.setFlowWeight")),
    setGroupWeight: (input) =>
      Effect.flatMap(Input.decodeGroupWeight(input), ({ groupId, weight }) =>
        write((tx, clock) =>
          Effect.map(tx.groups([groupId]), ([group]) => [undefined, Operations.setGroupWeight(group, groupId, weight, clock)] as const)
        )).pipe(Effect.withSpan("RelayQueue.setGroupWeight")),
    claim,
    claimBatch: (limit) =>
      Effect.flatMap(Input.decodeBatchSize(limit), claimUpTo).pipe(
        Effect.map(({ claims }) => claims),
        Metrics.withHotSpan("RelayQueue.claimBatch")
      ),
    claimUpTo: (limit) => Effect.flatMap(Input.decodeBatchSize(limit), claimUpTo).pipe(Metrics.withHotSpan("RelayQueue.claimBatch")),
    settle: (token, reply) =>
      Effect.flatMap(Input.decodeSettle(token, reply), (item) =>
        Effect.zipRight(
          Metrics.annotateHotSpan(() => ({ eventId: item[0].eventId, generation: item[0].generation })),
          Effect.map(settleAll([item]), (outcomes) => outcomes[0]!)
        )).pipe(Metrics.withHotSpan("RelayQueue.settle")),
    settleBatch: (items) =>
      Effect.flatMap(Input.decodeSettleBatch(items), settleAll).pipe(Metrics.withHotSpan("RelayQueue.settleBatch")),
    settleAndClaim: (items, limit) =>
      Effect.flatMap(Input.decodeSettleAndClaim(items, limit), ([decoded, n]) => settleAndClaim(decoded, n)).pipe(
        Metrics.withHotSpan("RelayQueue.settleAndClaim")
      ),
    redrive,
    redriveAll,
    discard,
    pause: (input) => setPaused(input, true),
    resume: (input) => setPaused(input, false),
    resetClock,
    snapshot,
    stats,
    events: listing("events", Input.decodeEventFilter, (tx) => tx.listEvents),
    flows: listing("flows", Input.decodePageFilter, (tx) => tx.listFlows),
    groups: listing("groups", Input.decodeGroupFilter, (tx) => tx.listGroups),
    inspect,
    audit: listing("audit", Input.decodeAuditFilter, (tx) => tx.listAudit),
    awaitWork: wake.await,
    watchWork: wake.watch,
    changes: Stream.fromPubSub(notable),
    watchChanges: PubSub.subscribe(notable),
    get retention() {
      return retention
    },
    // A prune reads the store's retention first: one set by an operator is the one it prunes by.
    prune: Retention.makePrune(backend, Effect.map(refreshPolicy, () => retention))
  }
}
