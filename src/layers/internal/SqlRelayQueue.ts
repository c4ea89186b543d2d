/**
 * The queue over SQL, shared by every SQL backend: the schema, and the reads and writes the
 * protocol asks for (`QueueBackend`). No decision is made here — `RelayQueue.make` decides. Each
 * read or write is one statement whatever the batch size: bulk writes pass their rows as one JSON
 * parameter (`json_each` on SQLite, `json_populate_recordset` on PostgreSQL).
 */
import { SqlClient } from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Either, Schema } from "effect"
import { InvalidInput, PolicyMismatch } from "../../domain/Errors.js"
import type { FlowId } from "../../domain/Ids.js"
import type { Head } from "../../domain/Operations.js"
import { adoptStored, makePolicy, protocolOf, ProtocolSettings } from "../../domain/Policy.js"
import type { PolicyInput, RelayPolicy } from "../../domain/Policy.js"
import type { EventRecord, FlowRecord } from "../../domain/Records.js"
import type { EventQuery, FlowQuery, Position, QueueBackend, QueueWrites } from "../../services/QueueBackend.js"
import * as RelayQueue from "../../services/RelayQueue.js"
import type { Retention } from "../../services/Retention.js"
import * as Rows from "./QueueRows.js"
import type { Fragment } from "@effect/sql/Statement"
import { chunks, idType, isolated, rowsTable } from "./Store.js"
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
  }),
  "5_store_settings": Effect.gen(function*() {
    const sql = yield* SqlClient
    // The protocol settings every process on this store runs (set by the first opener).
    yield* sql`CREATE TABLE relay_settings (id INTEGER PRIMARY KEY CHECK (id = 1), protocol TEXT NOT NULL)`
    // Operators page flows in turn order, drained and quarantined ones included.
    yield* sql`CREATE INDEX relay_flow_served ON relay_flow (served, flow_id)`
  }),
  "6_retention": Effect.gen(function*() {
    const sql = yield* SqlClient
    const id = idType(sql)
    // When an event was acked: retention prunes acked events by it, through a partial index.
    yield* sql`ALTER TABLE relay_event ADD COLUMN acked_at BIGINT`
    // Events acked before retention existed start their window at the store's current tick.
    yield* sql`UPDATE relay_event SET acked_at = (SELECT tick FROM relay_clock WHERE id = 1) WHERE state = 'acked'`
    yield* sql`CREATE INDEX relay_event_acked ON relay_event (acked_at) WHERE state = 'acked'`
    // What is kept of a pruned event, so a re-enqueue of its id is still recognised.
    yield* sql`CREATE TABLE relay_pruned (
      event_id ${id} PRIMARY KEY,
      flow_id ${id} NOT NULL,
      seq BIGINT NOT NULL,
      body_hash TEXT NOT NULL,
      pruned_at BIGINT NOT NULL)`
    yield* sql`CREATE INDEX relay_pruned_at ON relay_pruned (pruned_at)`
  }),
  "7_claim_mode": Effect.gen(function*() {
    const sql = yield* SqlClient
    // PostgreSQL only: how claims share the store ('exact' or 'parallel', chosen by the first
    // opener), and the ticket source of parallel claims (synchronised with relay_clock when the
    // store becomes parallel). SQLite has one writer: nothing to choose.
    yield* sql.onDialectOrElse({
      pg: () =>
        Effect.zipRight(
          sql`ALTER TABLE relay_settings ADD COLUMN claims TEXT CHECK (claims IN ('exact', 'parallel'))`,
          sql`CREATE SEQUENCE relay_ticket MINVALUE 0 START WITH 0`
        ),
      orElse: () => Effect.void
    })
  })
}

/** Name of the queue store's migrations table. */
export const migrationsTable = "relay_migrations"

/** The policy a layer was given, validated, or an `InvalidInput` naming the layer. */
export const decodePolicy = (input: PolicyInput | undefined, operation: string): Effect.Effect<RelayPolicy, InvalidInput> =>
  Either.match(makePolicy(input), {
    onLeft: (message) => Effect.fail(new InvalidInput({ operation, message: `policy: ${message}` })),
    onRight: Effect.succeed
  })

const decodeSettings = Schema.decodeUnknown(Schema.parseJson(ProtocolSettings))

/**
 * The policy this process runs on the store: a new store keeps the caller's protocol settings;
 * an existing one imposes its own, and a setting the caller gives explicitly must agree with it.
 */
export const resolvePolicy = (
  store: Store,
  requested: RelayPolicy,
  input: PolicyInput | undefined,
  name: string,
  mode: "create" | "readonly" = "create"
): Effect.Effect<RelayPolicy, InvalidInput | PolicyMismatch | SqlError> =>
  (mode === "create" ? store.write : store.read)(
    Effect.gen(function*() {
      const { sql } = store
      const [row] = yield* sql<{ readonly protocol: string }>`SELECT protocol FROM relay_settings WHERE id = 1`
      if (row === undefined) {
        // A read-only store written before settings were kept: it runs what the caller says.
        if (mode === "readonly") return requested
        yield* sql`INSERT INTO relay_settings (id, protocol) VALUES (1, ${JSON.stringify(protocolOf(requested))})`
        return requested
      }
      const stored = yield* Effect.mapError(
        decodeSettings(row.protocol),
        () => new InvalidInput({ operation: name, message: "the store's protocol settings are unreadable" })
      )
      return yield* Either.match(adoptStored(stored, requested, input), {
        onRight: Effect.succeed,
        onLeft: (settings) =>
          Effect.fail(
            new PolicyMismatch({
              store: name,
              settings,
              message: `this store runs ${settings.map((key) => `${key} = ${JSON.stringify(stored[key])}`).join(", ")}; ` +
                `this process asked for ${settings.map((key) => `${key} = ${JSON.stringify(requested[key])}`).join(", ")}. ` +
                `Open it without those settings to adopt the store's.`
            })
          )
      })
    })
  )

const eventColumns = ["event_id", "state", "next_at", "lease_until", "generation", "attempts", "lifetime_attempts", "reason"]
const insertColumns = [...eventColumns, "flow_id", "seq", "body"]
const updateColumns = [...eventColumns, "acked_at"]
const dedupColumns = ["event_id", "flow_id", "seq", "body_hash", "pruned_at"]
const flowColumns = ["flow_id", "seq", "served", "head_seq", "eligible_at", "weight", "burst"]

const events = (rows: ReadonlyArray<unknown>) => Effect.map(Rows.decode.events(rows), (decoded) => decoded.map(Rows.toEvent))
const flows = (rows: ReadonlyArray<unknown>) => Effect.map(Rows.decode.flows(rows), (decoded) => decoded.map(Rows.toFlow))
const audit = (rows: ReadonlyArray<unknown>) => Effect.map(Rows.decode.audit(rows), (decoded) => decoded.map(Rows.toAudit))
const identities = (rows: ReadonlyArray<unknown>) =>
  Effect.map(Rows.decode.identities(rows), (decoded) =>
    decoded.map((row) => ({ eventId: row.event_id, flowId: row.flow_id, seq: row.seq, bodyText: row.body, bodyHash: row.body_hash })))
const { aggregate: aggregates, clock: clocks, counts } = Rows.decode

/** One statement per part of `rows` that fits the bound-parameter limit (one part for any batch up to thousands). */
const bulk = <A>(rows: ReadonlyArray<A>, columns: number, statement: (part: ReadonlyArray<A>) => Effect.Effect<unknown, SqlError>) =>
  Effect.forEach(chunks(rows, columns), statement, { discard: true })

/** The queue's reads and writes over an opened SQL store. */
/**
 * Up to `limit` flows whose head is eligible at `now`, in turn order, with their heads; `lock`
 * ends the statement (row locks of a backend that claims in parallel).
 * `+eligible_at` keeps the planner on the turn index (an ordered walk that stops at `limit`)
 * instead of the wake index (a range over every eligible flow, then a sort).
 */
export const selectCandidates = (store: Store, lock: Fragment = store.sql.literal("")) => (now: number, limit: number) =>
  Effect.flatMap(
    store.exec(store.sql`SELECT f.flow_id, f.seq, f.served, f.head_seq, f.eligible_at, f.weight, f.burst,
        e.event_id AS h_event_id, e.body AS h_body, e.state AS h_state, e.next_at AS h_next_at,
        e.lease_until AS h_lease_until, e.generation AS h_generation, e.attempts AS h_attempts,
        e.lifetime_attempts AS h_lifetime_attempts, e.reason AS h_reason
      FROM relay_flow f JOIN relay_event e ON e.flow_id = f.flow_id AND e.seq = f.head_seq
      WHERE f.eligible_at IS NOT NULL AND +f.eligible_at <= ${now}
      ORDER BY f.served, f.flow_id LIMIT ${limit} ${lock}`),
    (rows) => Effect.map(Rows.decode.candidates(rows), (decoded) => decoded.map(Rows.toCandidate))
  )

/** The queue's reads and writes over an opened SQL store, each one statement. */
export const writes = (store: Store): QueueWrites => {
  const { sql } = store
  return {
    now: store.now,
    clock: Effect.map(Effect.flatMap(store.exec(sql`SELECT tick, ticket FROM relay_clock WHERE id = 1`), clocks), (rows) => rows[0]!),
    wakeAt: Effect.flatMap(
      store.exec(sql`SELECT MIN(eligible_at) AS at FROM relay_flow WHERE eligible_at IS NOT NULL`),
      (rows) => Effect.map(aggregates(rows), ([row]) => row!.at)
    ),
    candidates: selectCandidates(store),
    events: (ids) =>
      ids.length === 0 ? Effect.succeed([]) : Effect.flatMap(store.exec(sql`SELECT * FROM relay_event WHERE event_id IN ${sql.in(ids)}`), events),
    identities: (ids) =>
      ids.length === 0 ? Effect.succeed([]) : Effect.flatMap(
        store.exec(sql`SELECT event_id, flow_id, seq, body, NULL AS body_hash FROM relay_event WHERE event_id IN ${sql.in(ids)}
          UNION ALL SELECT event_id, flow_id, seq, NULL AS body, body_hash FROM relay_pruned WHERE event_id IN ${sql.in(ids)}`),
        identities
      ),
    eventsAt: (positions: ReadonlyArray<Position>) =>
      positions.length === 0 ? Effect.succeed([]) : Effect.flatMap(
        store.exec(sql`SELECT e.* FROM ${
          rowsTable(sql, "relay_event", ["flow_id", "seq"], positions.map((p) => ({ flow_id: p.flowId, seq: p.seq })))
        } JOIN relay_event e ON e.flow_id = v.flow_id AND e.seq = v.seq`),
        events
      ),
    flows: (ids: ReadonlyArray<FlowId>) =>
      ids.length === 0 ? Effect.succeed([]) : Effect.flatMap(store.exec(sql`SELECT * FROM relay_flow WHERE flow_id IN ${sql.in(ids)}`), flows),
    reachingBeyond: (nextAtAfter, leaseAfter) =>
      Effect.flatMap(
        store.exec(sql`SELECT * FROM relay_event WHERE (state = 'ready' AND next_at > ${nextAtAfter})
          OR (state = 'inflight' AND lease_until > ${leaseAfter})`),
        events
      ),
    listEvents: (query: EventQuery) =>
      Effect.flatMap(
        store.exec(sql`SELECT * FROM relay_event WHERE ${
          sql.and([
            ...(query.state === undefined ? [] : [sql`state = ${query.state}`]),
            ...(query.flowId === undefined ? [] : [sql`flow_id = ${query.flowId}`]),
            ...(query.afterEventId === undefined ? [] : [sql`event_id > ${query.afterEventId}`])
          ])
        } ORDER BY event_id LIMIT ${query.limit}`),
        events
      ),
    listFlows: (query: FlowQuery) =>
      Effect.flatMap(
        query.order === "id"
          ? store.exec(sql`SELECT * FROM relay_flow WHERE ${query.after === undefined ? sql.literal("1 = 1") : sql`flow_id > ${query.after}`}
              ORDER BY flow_id LIMIT ${query.limit}`)
          : store.exec(sql`SELECT * FROM relay_flow WHERE ${
            query.after === undefined
              ? sql.literal("1 = 1")
              : sql`(served > ${query.after.served} OR (served = ${query.after.served} AND flow_id > ${query.after.flowId}))`
          } ORDER BY served, flow_id LIMIT ${query.limit}`),
        flows
      ),
    listAudit: (query) =>
      Effect.flatMap(
        store.exec(sql`SELECT * FROM relay_audit WHERE ${query.eventId === undefined ? sql.literal("1 = 1") : sql`event_id = ${query.eventId}`}
          ORDER BY id ${query.limit === undefined ? sql.literal("") : sql`LIMIT ${query.limit}`}`),
        audit
      ),
    dump: Effect.all({
      flows: Effect.flatMap(store.exec(sql`SELECT * FROM relay_flow ORDER BY flow_id`), flows),
      events: Effect.flatMap(store.exec(sql`SELECT * FROM relay_event ORDER BY flow_id, seq`), events),
      audit: Effect.flatMap(store.exec(sql`SELECT * FROM relay_audit ORDER BY id`), audit)
    }),
    countByState: Effect.flatMap(store.exec(sql`SELECT state, COUNT(*) AS n FROM relay_event GROUP BY state`), (rows) =>
      Effect.map(counts(rows), (decoded) => {
        const byState = { ready: 0, inflight: 0, acked: 0, quarantined: 0 }
        for (const { n, state } of decoded) byState[state] = n
        return byState
      })),
    eligibleHeads: (now) =>
      Effect.flatMap(
        store.exec(sql`SELECT MIN(eligible_at) AS at, COUNT(*) AS n FROM relay_flow WHERE eligible_at IS NOT NULL AND eligible_at <= ${now}`),
        (rows) => Effect.map(aggregates(rows), ([row]) => ({ count: row!.n ?? 0, oldest: row!.at }))
      ),
    pruneCandidates: (cutoff, limit) =>
      Effect.flatMap(
        store.exec(sql`SELECT event_id, flow_id, seq, state, acked_at, body FROM relay_event
          WHERE state = 'acked' AND acked_at <= ${cutoff} ORDER BY acked_at LIMIT ${limit}`),
        (rows) => Effect.map(Rows.decode.pruneCandidates(rows), (decoded) => decoded.map(Rows.toPruneCandidate))
      ),
    countPrunable: (eventCutoff, dedupCutoff, limit) =>
      Effect.all({
        events: eventCutoff === null ? Effect.succeed(0) : Effect.flatMap(
          store.exec(sql`SELECT NULL AS at, COUNT(*) AS n FROM (SELECT 1 AS one FROM relay_event
            WHERE state = 'acked' AND acked_at <= ${eventCutoff} LIMIT ${limit}) AS due`),
          (rows) => Effect.map(aggregates(rows), ([row]) => row?.n ?? 0)
        ),
        dedup: dedupCutoff === null ? Effect.succeed(0) : Effect.flatMap(
          store.exec(sql`SELECT NULL AS at, COUNT(*) AS n FROM (SELECT 1 AS one FROM relay_pruned WHERE pruned_at <= ${dedupCutoff} LIMIT ${limit}) AS due`),
          (rows) => Effect.map(aggregates(rows), ([row]) => row?.n ?? 0)
        )
      }),

    setClock: (clock) => Effect.asVoid(store.exec(sql`UPDATE relay_clock SET tick = ${clock.tick}, ticket = ${clock.ticket} WHERE id = 1`)),
    insertEvents: (rows) =>
      bulk(rows, insertColumns.length, (rows) =>
        store.exec(sql`INSERT INTO relay_event (${sql.literal(insertColumns.join(", "))})
          SELECT ${sql.literal(insertColumns.map((c) => `v.${c}`).join(", "))}
          FROM ${rowsTable(sql, "relay_event", insertColumns, rows.map(Rows.eventInsert))}`)
      ),
    updateEvents: (records: ReadonlyArray<EventRecord>, acked = []) => {
      const ackedAt = new Map(acked.map((a): [string, number] => [a.eventId, a.ackedAt]))
      // An acked event keeps the ack time it has; any other state has none.
      return bulk(records, updateColumns.length, (records) =>
        store.exec(sql`UPDATE relay_event SET state = v.state, next_at = v.next_at, lease_until = v.lease_until,
            generation = v.generation, attempts = v.attempts, lifetime_attempts = v.lifetime_attempts, reason = v.reason,
            acked_at = CASE WHEN v.state = 'acked' THEN COALESCE(v.acked_at, relay_event.acked_at) END
          FROM ${
          rowsTable(sql, "relay_event", updateColumns, records.map((e) => ({ ...Rows.eventUpdate(e), acked_at: ackedAt.get(e.eventId) ?? null })))
        }
          WHERE relay_event.event_id = v.event_id`)
      )
    },
    putFlows: (records: ReadonlyArray<FlowRecord>) =>
      // `WHERE true` tells SQLite's parser that ON CONFLICT belongs to the INSERT, not a join.
      bulk(records, flowColumns.length, (records) =>
        store.exec(sql`INSERT INTO relay_flow (${sql.literal(flowColumns.join(", "))})
          SELECT ${sql.literal(flowColumns.map((c) => `v.${c}`).join(", "))}
          FROM ${rowsTable(sql, "relay_flow", flowColumns, records.map(Rows.flowRow))} WHERE true
          ON CONFLICT (flow_id) DO UPDATE SET seq = excluded.seq, served = excluded.served, head_seq = excluded.head_seq,
            eligible_at = excluded.eligible_at, weight = excluded.weight, burst = excluded.burst`)
      ),
    setHeads: (heads: ReadonlyArray<Head>) =>
      bulk(heads, 3, (heads) =>
        store.exec(sql`UPDATE relay_flow SET head_seq = v.head_seq, eligible_at = v.eligible_at
          FROM ${
          rowsTable(
            sql,
            "relay_flow",
            ["flow_id", "head_seq", "eligible_at"],
            heads.map((h) => ({ flow_id: h.flowId, head_seq: h.headSeq, eligible_at: h.eligibleAt }))
          )
        } WHERE relay_flow.flow_id = v.flow_id`)
      ),
    appendAudit: (record) =>
      Effect.asVoid(
        store.exec(sql`INSERT INTO relay_audit (event_id, reason, generation, tick, actor)
          VALUES (${record.eventId}, ${record.reason}, ${record.generation}, ${record.tick}, ${record.actor})`)
      ),
    putDedup: (records) =>
      bulk(records, dedupColumns.length, (records) =>
        store.exec(sql`INSERT INTO relay_pruned (${sql.literal(dedupColumns.join(", "))})
          SELECT ${sql.literal(dedupColumns.map((c) => `v.${c}`).join(", "))}
          FROM ${rowsTable(sql, "relay_pruned", dedupColumns, records.map(Rows.dedupRow))} WHERE true
          ON CONFLICT (event_id) DO UPDATE SET flow_id = excluded.flow_id, seq = excluded.seq,
            body_hash = excluded.body_hash, pruned_at = excluded.pruned_at`)
      ),
    deleteAcked: (ids) =>
      ids.length === 0 ? Effect.succeed(0) : Effect.map(
        store.exec(sql`DELETE FROM relay_event WHERE event_id IN ${sql.in(ids)} AND state = 'acked' RETURNING event_id`),
        (rows) => rows.length
      ),
    deleteDedup: (cutoff, limit) =>
      Effect.map(
        store.exec(sql`DELETE FROM relay_pruned WHERE event_id IN (
            SELECT event_id FROM relay_pruned WHERE pruned_at <= ${cutoff} ORDER BY pruned_at LIMIT ${limit}) RETURNING event_id`),
        (rows) => rows.length
      )
  }
}

/**
 * The queue's store over an opened SQL store: `tx` reads and writes (default `writes(store)`);
 * `writeTx`, when given, makes the writes of each write transaction instead (a backend whose
 * writes keep per-transaction state).
 */
export const backend = (store: Store, tx: QueueWrites = writes(store), writeTx?: () => QueueWrites): QueueBackend => {
  const withTx = writeTx === undefined
    ? <A>(body: (tx: QueueWrites) => A) => body(tx)
    : <A, E>(body: (tx: QueueWrites) => Effect.Effect<A, E>) => Effect.suspend(() => body(writeTx()))
  const { join } = store
  return {
    write: (body, beforeCommit) =>
      store.write(withTx((tx) => (beforeCommit === undefined ? body(tx) : Effect.zipLeft(body(tx), isolated(beforeCommit))))),
    read: (body) => store.read(body(tx)),
    join: join === undefined ? undefined : (body) => join(withTx(body))
  }
}

/** Builds the queue service over an opened store. */
export const make = (store: Store, policy: RelayPolicy, retention?: Retention): RelayQueue.RelayQueueService =>
  RelayQueue.make(backend(store), policy, retention)

/**
 * Opens the queue on an opened store: the store's policy resolved against the caller's (a
 * read-only store is only read: its settings are adopted, never written).
 */
export const open = (
  store: Store,
  requested: RelayPolicy,
  input: PolicyInput | undefined,
  name: string,
  mode: "create" | "readonly" = "create",
  retention?: Retention
) => Effect.map(resolvePolicy(store, requested, input, name, mode), (policy) => make(store, policy, retention))
