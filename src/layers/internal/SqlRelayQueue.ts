/**
 * The queue over SQL, shared by every backend: schema, row mapping and the five operations.
 * Decisions are the domain's (`Protocol`); this module only reads rows, asks, and writes back.
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Either, Metric, Random } from "effect"
import { EventNotFound, InvalidInput } from "../../domain/Errors.js"
import type { EventId, FlowId } from "../../domain/Ids.js"
import { parseStored } from "../../domain/Json.js"
import type { Claimed, ClaimOutcome, DeliveryReply, EnqueueResult, Redriven, SettleOutcome } from "../../domain/Outcomes.js"
import { makePolicy } from "../../domain/Policy.js"
import type { PolicyInput, RelayPolicy } from "../../domain/Policy.js"
import * as Protocol from "../../domain/Protocol.js"
import type { AuditRecord, ClockRecord, EventRecord, EventState, FlowRecord, Token } from "../../domain/Records.js"
import * as Faults from "../../services/Faults.js"
import * as Metrics from "../../services/Metrics.js"
import * as RelayQueue from "../../services/RelayQueue.js"
import { idType, int, intOrNull, isolated } from "./Store.js"
import type { Store } from "./Store.js"

/** Embedded migrations of the queue store. */
export const migrations: Record<string, Effect.Effect<void, SqlError, SqlClient>> = {
  "1_relay_schema": Effect.gen(function*() {
    const sql = yield* SqlClient
    const id = idType(sql)
    yield* sql`CREATE TABLE relay_clock (
      id INTEGER PRIMARY KEY CHECK (id = 1),
      tick BIGINT NOT NULL,
      ticket BIGINT NOT NULL)`
    yield* sql`INSERT INTO relay_clock (id, tick, ticket) VALUES (1, 0, 0)`
    yield* sql`CREATE TABLE relay_flow (
      flow_id ${id} PRIMARY KEY,
      seq BIGINT NOT NULL,
      served BIGINT NOT NULL,
      head_seq BIGINT,
      eligible_at BIGINT)`
    // The claim is an ordered walk of this index over flows whose head can become eligible.
    yield* sql`CREATE INDEX relay_flow_turn ON relay_flow (served, flow_id) WHERE eligible_at IS NOT NULL`
    yield* sql`CREATE TABLE relay_event (
      event_id ${id} PRIMARY KEY,
      flow_id ${id} NOT NULL,
      seq BIGINT NOT NULL,
      body TEXT NOT NULL,
      state TEXT NOT NULL CHECK (state IN ('ready', 'inflight', 'acked', 'quarantined')),
      next_at BIGINT NOT NULL,
      lease_until BIGINT,
      generation BIGINT NOT NULL,
      attempts BIGINT NOT NULL,
      lifetime_attempts BIGINT NOT NULL,
      reason TEXT,
      UNIQUE (flow_id, seq))`
    yield* sql.onDialectOrElse({
      pg: () => sql`CREATE TABLE relay_audit (
        id BIGSERIAL PRIMARY KEY, event_id TEXT NOT NULL, reason TEXT NOT NULL, generation BIGINT NOT NULL, tick BIGINT NOT NULL)`,
      orElse: () => sql`CREATE TABLE relay_audit (
        id INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL, reason TEXT NOT NULL, generation BIGINT NOT NULL, tick BIGINT NOT NULL)`
    })
  }),
  "2_flow_weights": Effect.gen(function*() {
    const sql = yield* SqlClient
    yield* sql`ALTER TABLE relay_flow ADD COLUMN weight BIGINT NOT NULL DEFAULT 1`
    yield* sql`ALTER TABLE relay_flow ADD COLUMN burst BIGINT NOT NULL DEFAULT 0`
  }),
  "3_flow_wake": Effect.gen(function*() {
    const sql = yield* SqlClient
    // An idle claim reports when the next head becomes eligible: the least eligible_at.
    yield* sql`CREATE INDEX relay_flow_wake ON relay_flow (eligible_at) WHERE eligible_at IS NOT NULL`
  }),
  "4_audit_actor": Effect.gen(function*() {
    const sql = yield* SqlClient
    // Who made a redrive decision, next to why.
    yield* sql`ALTER TABLE relay_audit ADD COLUMN actor TEXT`
  })
}

/** The policy a layer was given, validated, or an `InvalidInput` naming the layer. */
export const decodePolicy = (input: PolicyInput | undefined, operation: string): Effect.Effect<RelayPolicy, InvalidInput> =>
  Either.match(makePolicy(input), {
    onLeft: (message) => Effect.fail(new InvalidInput({ operation, message: `policy: ${message}` })),
    onRight: Effect.succeed
  })

/** Name of the queue store's migrations table. */
export const migrationsTable = "relay_migrations"

type Row = Record<string, unknown>

const toEvent = (row: Row): EventRecord => ({
  eventId: row.event_id as EventId,
  flowId: row.flow_id as FlowId,
  seq: int(row.seq),
  body: parseStored(row.body as string),
  state: row.state as EventState,
  nextAt: int(row.next_at),
  leaseUntil: intOrNull(row.lease_until),
  generation: int(row.generation),
  attempts: int(row.attempts),
  lifetimeAttempts: int(row.lifetime_attempts),
  reason: (row.reason as string | null) ?? null
})

const toFlow = (row: Row): FlowRecord => ({
  flowId: row.flow_id as FlowId,
  seq: int(row.seq),
  served: int(row.served),
  headSeq: intOrNull(row.head_seq),
  eligibleAt: intOrNull(row.eligible_at),
  weight: int(row.weight),
  burst: int(row.burst)
})

const toAudit = (row: Row): AuditRecord => ({
  eventId: row.event_id as EventId,
  reason: row.reason as string,
  generation: int(row.generation),
  tick: int(row.tick),
  actor: (row.actor as string | null) ?? null
})

/**
 * Wakes this process's sleeping workers when work arrives through this queue instance (an
 * enqueue, a redrive, an ack that exposes the next head). Other processes poll.
 */
const makeWake = () => {
  let waiters: Array<() => void> = []
  return {
    signal: Effect.sync(() => {
      const woken = waiters
      waiters = []
      for (const resume of woken) resume()
    }),
    await: Effect.async<void>((resume) => {
      const waiter = () => resume(Effect.void)
      waiters.push(waiter)
      return Effect.sync(() => {
        waiters = waiters.filter((w) => w !== waiter)
      })
    })
  }
}

/** Builds the queue service over an opened store. */
export const make = (store: Store, policy: RelayPolicy): RelayQueue.RelayQueueService => {
  const { sql } = store
  const wake = makeWake()

  const readClock = Effect.map(
    sql<Row>`SELECT tick, ticket FROM relay_clock WHERE id = 1`,
    (rows): ClockRecord => ({ tick: int(rows[0]!.tick), ticket: int(rows[0]!.ticket) })
  )
  const writeClock = (clock: ClockRecord) =>
    sql`UPDATE relay_clock SET tick = ${clock.tick}, ticket = ${clock.ticket} WHERE id = 1`

  /**
   * One write operation: takes the write lock, checks the clock, runs `body` with the advanced
   * clock and stores the clock `body` returns (claims advance the ticket). Fault points
   * bracket the commit when the operation names them.
   */
  const writeOp = <A, E>(
    name: string,
    body: (clock: ClockRecord) => Effect.Effect<readonly [A, ClockRecord], E>,
    faults?: { readonly before: Faults.FaultPoint; readonly after: Faults.FaultPoint },
    annotate?: (value: A) => Record<string, unknown>
  ) =>
    Effect.gen(function*() {
      const result = yield* store.write(
        Effect.gen(function*() {
          // Read only once the write lock is ours: a time read before waiting for it would be
          // older than what the previous holder stored.
          const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
          const { clamped, clock } = yield* Either.match(Protocol.advanceClock(yield* readClock, now, policy.clock), {
            onLeft: Effect.fail,
            onRight: Effect.succeed
          })
          if (clamped) yield* Metric.increment(Metrics.clockClamped)
          const [value, after] = yield* body(clock)
          yield* writeClock(after)
          // A fault hook must not run inside our transaction by accident (say, with another client).
          if (faults) yield* isolated(Faults.hit(faults.before))
          return value
        })
      )
      if (faults) yield* Faults.hit(faults.after)
      // Here, not inside the transaction, where the current span is the SQL transaction's.
      if (annotate) yield* Effect.annotateCurrentSpan(annotate(result))
      return result
    }).pipe(Effect.withSpan(`RelayQueue.${name}`))

  const eventById = (eventId: string) =>
    Effect.map(sql<Row>`SELECT * FROM relay_event WHERE event_id = ${eventId}`, (rows) =>
      rows[0] === undefined ? undefined : toEvent(rows[0]))

  const eventAt = (flowId: string, seq: number) =>
    Effect.map(sql<Row>`SELECT * FROM relay_event WHERE flow_id = ${flowId} AND seq = ${seq}`, (rows) =>
      rows[0] === undefined ? undefined : toEvent(rows[0]))

  const updateEvent = (e: EventRecord) =>
    sql`UPDATE relay_event SET state = ${e.state}, next_at = ${e.nextAt}, lease_until = ${e.leaseUntil},
      generation = ${e.generation}, attempts = ${e.attempts}, lifetime_attempts = ${e.lifetimeAttempts},
      reason = ${e.reason} WHERE event_id = ${e.eventId}`

  /** Keeps the flow's cached head in step with the event that is (or was) its head. */
  const syncHead = (head: EventRecord) =>
    Effect.gen(function*() {
      if (head.state !== "acked") {
        return yield* sql`UPDATE relay_flow SET head_seq = ${head.seq}, eligible_at = ${Protocol.eligibleAt(head)}
          WHERE flow_id = ${head.flowId}`
      }
      const next = yield* eventAt(head.flowId, head.seq + 1)
      yield* sql`UPDATE relay_flow SET head_seq = ${next?.seq ?? null},
        eligible_at = ${next === undefined ? null : Protocol.eligibleAt(next)} WHERE flow_id = ${head.flowId}`
    })

  const enqueueOne = (command: RelayQueue.EnqueueCommand, clock: ClockRecord) =>
    Effect.gen(function*() {
      const [stored] = yield* sql<Row>`SELECT flow_id, seq, body FROM relay_event WHERE event_id = ${command.eventId}`
      if (stored !== undefined) {
        const identity = { flowId: stored.flow_id as FlowId, seq: int(stored.seq), bodyText: stored.body as string }
        const existing = yield* Either.match(Protocol.reenqueue(identity, command.eventId, command.flowId, command.body.text), {
          onLeft: Effect.fail,
          onRight: Effect.succeed
        })
        return [existing as EnqueueResult, clock] as const
      }
      const [flow] = yield* sql<Row>`SELECT seq, head_seq, served FROM relay_flow WHERE flow_id = ${command.flowId}`
      const seq = flow === undefined ? 1 : int(flow.seq) + 1
      let after = clock
      if (flow === undefined) {
        const admitted = Protocol.admit(policy, clock, 0)
        after = admitted.clock
        yield* sql`INSERT INTO relay_flow (flow_id, seq, served, head_seq, eligible_at, weight, burst)
          VALUES (${command.flowId}, ${seq}, ${admitted.served}, ${seq}, ${clock.tick}, ${command.weight ?? 1}, 0)`
      } else if (flow.head_seq === null) {
        const admitted = Protocol.admit(policy, clock, int(flow.served))
        after = admitted.clock
        // A flow that keeps its place (seed admission) keeps its turn too; a new place starts a new turn.
        yield* sql`UPDATE relay_flow SET seq = ${seq}, head_seq = ${seq}, eligible_at = ${clock.tick},
          served = ${admitted.served}, burst = CASE WHEN served = ${admitted.served} THEN burst ELSE 0 END
          WHERE flow_id = ${command.flowId}`
      } else {
        yield* sql`UPDATE relay_flow SET seq = ${seq} WHERE flow_id = ${command.flowId}`
      }
      if (flow !== undefined && command.weight !== undefined) yield* setWeight(command.flowId, command.weight)
      yield* sql`INSERT INTO relay_event (event_id, flow_id, seq, body, state, next_at, lease_until,
          generation, attempts, lifetime_attempts, reason)
        VALUES (${command.eventId}, ${command.flowId}, ${seq}, ${command.body.text}, 'ready', ${clock.tick}, NULL,
          0, 0, 0, NULL)`
      return [{ _tag: "Enqueued", seq } as EnqueueResult, after] as const
    })

  const setWeight = (flowId: string, weight: number) =>
    // Only a new weight starts a new turn: re-sending the same weight with every enqueue must not.
    sql`UPDATE relay_flow SET burst = CASE WHEN weight = ${weight} THEN burst ELSE 0 END, weight = ${weight}
      WHERE flow_id = ${flowId}`

  const enqueued = (results: ReadonlyArray<EnqueueResult>) => {
    const added = results.filter((r) => r._tag === "Enqueued").length
    return added === 0 ? Effect.void : Effect.zipRight(Metric.incrementBy(Metrics.enqueued, added), wake.signal)
  }

  const enqueue = (input: RelayQueue.EnqueueInput) =>
    Effect.flatMap(RelayQueue.decodeEnqueue(input, policy), (command) =>
      writeOp("enqueue", (clock) => enqueueOne(command, clock)).pipe(Effect.tap((result) => enqueued([result]))))

  const enqueueBatch = (inputs: ReadonlyArray<RelayQueue.EnqueueInput>) =>
    Effect.flatMap(RelayQueue.decodeEnqueueBatch(inputs, policy), (commands) =>
      writeOp("enqueueBatch", (clock) =>
        Effect.gen(function*() {
          const results: Array<EnqueueResult> = []
          let current = clock
          for (const command of commands) {
            const [result, after] = yield* enqueueOne(command, current)
            results.push(result)
            current = after
          }
          return [results as ReadonlyArray<EnqueueResult>, current] as const
        })).pipe(Effect.tap(enqueued)))

  const setFlowWeight = (input: RelayQueue.FlowWeightInput) =>
    Effect.flatMap(RelayQueue.decodeFlowWeight(input), ({ flowId, weight }) =>
      writeOp("setFlowWeight", (clock) =>
        Effect.gen(function*() {
          const [flow] = yield* sql<Row>`SELECT flow_id FROM relay_flow WHERE flow_id = ${flowId}`
          if (flow !== undefined) {
            yield* setWeight(flowId, weight)
            return [undefined, clock] as const
          }
          // A flow named before its first event: it enters the rotation with that event.
          yield* sql`INSERT INTO relay_flow (flow_id, seq, served, head_seq, eligible_at, weight, burst)
            VALUES (${flowId}, 0, 0, NULL, NULL, ${weight}, 0)`
          return [undefined, clock] as const
        })))

  /** The earliest tick at which a head becomes eligible (an index seek), if any will without new work. */
  const wakeAt = Effect.map(
    sql<Row>`SELECT MIN(eligible_at) AS wake FROM relay_flow WHERE eligible_at IS NOT NULL`,
    (rows) => intOrNull(rows[0]?.wake)
  )

  const idleAt = (at: number | null): ClaimOutcome => (at === null ? { _tag: "Idle" } : { _tag: "Idle", wakeAt: at })

  /**
   * Claims up to `limit` eligible heads in turn order, one per flow, each with its own ticket.
   * Also returns the wake time when nothing is eligible: checked first, so an idle claim is one
   * index seek instead of a walk over every waiting flow.
   */
  const claimUpTo = (limit: number, clock: ClockRecord) =>
    Effect.gen(function*() {
      const wake = yield* wakeAt
      if (wake === null || wake > clock.tick) {
        return [[] as Array<typeof Claimed.Type>, clock, wake] as const
      }
      // `+eligible_at` keeps the planner on the turn index (an ordered walk that stops at `limit`)
      // instead of the wake index (a range over every eligible flow, then a sort).
      const turns = yield* sql<Row>`SELECT flow_id, head_seq, served, weight, burst FROM relay_flow
        WHERE eligible_at IS NOT NULL AND +eligible_at <= ${clock.tick}
        ORDER BY served, flow_id LIMIT ${limit}`
      const claims: Array<typeof Claimed.Type> = []
      let ticket = clock.ticket
      for (const turn_ of turns) {
        const head = yield* eventAt(turn_.flow_id as string, int(turn_.head_seq))
        if (head === undefined || !Protocol.isEligible(head, clock.tick)) {
          return yield* Effect.dieMessage(`flow ${String(turn_.flow_id)} caches a head that is not eligible`)
        }
        const claimed = Protocol.claimEvent(head, clock.tick, policy)
        ticket += 1
        const turn = Protocol.turnAfterClaim({ served: int(turn_.served), weight: int(turn_.weight), burst: int(turn_.burst) }, ticket)
        yield* updateEvent(claimed)
        yield* sql`UPDATE relay_flow SET served = ${turn.served}, burst = ${turn.burst}, eligible_at = ${claimed.leaseUntil}
          WHERE flow_id = ${claimed.flowId}`
        claims.push({
          _tag: "Claimed",
          token: { eventId: claimed.eventId, generation: claimed.generation },
          event: claimed,
          leaseUntil: claimed.leaseUntil!
        })
      }
      return [claims, { ...clock, ticket }, null] as const
    })

  const claimFaults = { before: "claim:before-commit", after: "claim:after-commit" } as const


  const countClaims = (claims: ReadonlyArray<typeof Claimed.Type>) =>
    claims.length === 0 ? Metric.increment(Metrics.idleClaims) : Metric.incrementBy(Metrics.claims, claims.length)

  const claim = writeOp(
    "claim",
    (clock) =>
      Effect.map(claimUpTo(1, clock), ([claims, after, wake]) => [claims[0] ?? idleAt(wake), after] as const),
    claimFaults,
    (outcome) =>
      outcome._tag === "Claimed"
        ? { eventId: outcome.event.eventId, flowId: outcome.event.flowId, generation: outcome.token.generation }
        : { idle: true }
  ).pipe(Effect.tap((outcome) => countClaims(outcome._tag === "Claimed" ? [outcome] : [])))

  const claimBatch = (limit: number) =>
    Effect.flatMap(RelayQueue.decodeBatchSize(limit), (n) =>
      writeOp("claimBatch", (clock) => Effect.map(claimUpTo(n, clock), ([claims, after]) => [claims, after] as const), claimFaults)
        .pipe(Effect.tap(countClaims)))

  const settleOne = (token: Token, reply: DeliveryReply, clock: ClockRecord) =>
    Effect.gen(function*() {
      const draw = policy.jitter === "full" ? yield* Random.next : 1
      const decision = Protocol.settleEvent(yield* eventById(token.eventId), token, reply, clock.tick, policy, draw)
      if (decision.next !== undefined) {
        yield* updateEvent(decision.next)
        yield* syncHead(decision.next)
      }
      yield* Metric.increment(Metric.tagged(Metrics.settles, "outcome", decision.outcome._tag))
      return decision.outcome
    })

  const settleFaults = { before: "settle:before-commit", after: "settle:after-commit" } as const

  const settle = (token: RelayQueue.TokenInput, reply: unknown) =>
    Effect.flatMap(RelayQueue.decodeSettle(token, reply), ([token, reply]) =>
      writeOp("settle", (clock) => Effect.map(settleOne(token, reply, clock), (outcome) => [outcome, clock] as const), settleFaults)
        .pipe(
          Effect.tap((outcome) => (outcome._tag === "Acked" ? wake.signal : Effect.void)),
          Effect.annotateSpans({ eventId: token.eventId, generation: token.generation })
        ))

  const settleBatch = (items: ReadonlyArray<RelayQueue.SettleInput>) =>
    Effect.flatMap(RelayQueue.decodeSettleBatch(items), (decoded) =>
      writeOp(
        "settleBatch",
        (clock) =>
          Effect.map(
            Effect.forEach(decoded, ([token, reply]) => settleOne(token, reply, clock)),
            (outcomes) => [outcomes as ReadonlyArray<SettleOutcome>, clock] as const
          ),
        settleFaults
      ))

  const redrive = (input: RelayQueue.RedriveInput) =>
    Effect.flatMap(RelayQueue.decodeRedrive(input), (request) =>
      writeOp("redrive", (clock) =>
        Effect.gen(function*() {
          const next = yield* Either.match(
            Protocol.redriveEvent(yield* eventById(request.eventId), request, clock.tick),
            { onLeft: Effect.fail, onRight: Effect.succeed }
          )
          yield* updateEvent(next)
          yield* syncHead(next)
          yield* sql`INSERT INTO relay_audit (event_id, reason, generation, tick, actor)
            VALUES (${next.eventId}, ${request.reason}, ${next.generation}, ${clock.tick}, ${request.actor ?? null})`
          return [{ _tag: "Redriven", generation: next.generation } as Redriven, clock] as const
        })).pipe(Effect.zipLeft(Metric.increment(Metrics.redrives)), Effect.zipLeft(wake.signal)))

  const snapshot = store.read(
    Effect.all({
      clock: readClock,
      flows: Effect.map(sql<Row>`SELECT * FROM relay_flow ORDER BY flow_id`, (rows) => rows.map(toFlow)),
      events: Effect.map(sql<Row>`SELECT * FROM relay_event ORDER BY flow_id, seq`, (rows) => rows.map(toEvent)),
      audit: Effect.map(sql<Row>`SELECT * FROM relay_audit ORDER BY id`, (rows) => rows.map(toAudit))
    })
  ).pipe(Effect.withSpan("RelayQueue.snapshot"))

  const stats = store.read(
    Effect.gen(function*() {
      const now = yield* Effect.clockWith((clock) => clock.currentTimeMillis)
      const counts = yield* sql<Row>`SELECT state, COUNT(*) AS n FROM relay_event GROUP BY state`
      const byState = { ready: 0, inflight: 0, acked: 0, quarantined: 0 }
      for (const row of counts) byState[row.state as EventState] = int(row.n)
      const [oldest] = yield* sql<Row>`SELECT MIN(eligible_at) AS at FROM relay_flow
        WHERE eligible_at IS NOT NULL AND eligible_at <= ${now}`
      const oldestAt = intOrNull(oldest?.at)
      const [eligible] = yield* sql<Row>`SELECT COUNT(*) AS n FROM relay_flow WHERE eligible_at IS NOT NULL AND eligible_at <= ${now}`
      return {
        byState,
        eligibleHeads: int(eligible?.n ?? 0),
        oldestEligibleAgeMillis: oldestAt === null ? 0 : Math.max(0, now - oldestAt),
        clock: yield* readClock
      }
    })
  ).pipe(Effect.withSpan("RelayQueue.stats"))

  const listEvents = (filter: RelayQueue.EventFilter = {}) =>
    Effect.flatMap(RelayQueue.decodeEventFilter(filter), ({ afterEventId, flowId, limit, state }) =>
      store.read(
        Effect.map(
          sql<Row>`SELECT * FROM relay_event WHERE ${
            sql.and([
              ...(state === undefined ? [] : [sql`state = ${state}`]),
              ...(flowId === undefined ? [] : [sql`flow_id = ${flowId}`]),
              ...(afterEventId === undefined ? [] : [sql`event_id > ${afterEventId}`])
            ])
          } ORDER BY event_id LIMIT ${limit}`,
          (rows) => rows.map(toEvent)
        )
      )).pipe(Effect.withSpan("RelayQueue.events"))

  const listFlows = (filter: RelayQueue.PageFilter = {}) =>
    Effect.flatMap(RelayQueue.decodePageFilter(filter), ({ after, limit }) =>
      store.read(
        Effect.map(
          sql<Row>`SELECT * FROM relay_flow WHERE ${after === undefined ? sql.literal("1 = 1") : sql`flow_id > ${after}`}
            ORDER BY flow_id LIMIT ${limit}`,
          (rows) => rows.map(toFlow)
        )
      )).pipe(Effect.withSpan("RelayQueue.flows"))

  const inspect = (eventId: string) =>
    Effect.flatMap(RelayQueue.decodeEventId(eventId, "inspect"), (id) =>
      store.read(
        Effect.gen(function*() {
          const event = yield* eventById(id)
          if (event === undefined) return yield* Effect.fail(new EventNotFound({ eventId: id }))
          const audit = yield* sql<Row>`SELECT * FROM relay_audit WHERE event_id = ${id} ORDER BY id`
          return { event, audit: audit.map(toAudit) }
        })
      )).pipe(Effect.withSpan("RelayQueue.inspect"))

  const auditLog = (filter: RelayQueue.AuditFilter = {}) =>
    Effect.flatMap(RelayQueue.decodeAuditFilter(filter), ({ eventId, limit }) =>
      store.read(
        Effect.map(
          sql<Row>`SELECT * FROM relay_audit WHERE ${eventId === undefined ? sql.literal("1 = 1") : sql`event_id = ${eventId}`}
            ORDER BY id LIMIT ${limit}`,
          (rows) => rows.map(toAudit)
        )
      )).pipe(Effect.withSpan("RelayQueue.audit"))

  return {
    policy,
    events: listEvents,
    flows: listFlows,
    inspect,
    audit: auditLog,
    enqueue,
    enqueueBatch,
    setFlowWeight,
    claim,
    claimBatch,
    settle,
    settleBatch,
    redrive,
    snapshot,
    stats,
    awaitWork: wake.await
  }
}
