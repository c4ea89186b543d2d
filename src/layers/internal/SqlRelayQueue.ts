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
import type { EventId, FlowId } from "../../domain/Ids.js"
import { rotationComplete } from "../../domain/Operations.js"
import type { Candidate, Head } from "../../domain/Operations.js"
import { adoptStored, makePolicy, protocolOf, ProtocolSettings } from "../../domain/Policy.js"
import type { PolicyInput, RelayPolicy } from "../../domain/Policy.js"
import { compareIds } from "../../domain/Protocol.js"
import type { EventRecord, FlowRecord, GroupRecord } from "../../domain/Records.js"
import type { ClaimRead, EventQuery, FlowQuery, Position, QueueBackend, QueueWrites } from "../../services/QueueBackend.js"
import * as RelayQueue from "../../services/RelayQueue.js"
import type { Retention } from "../../services/Retention.js"
import type { Fragment } from "@effect/sql/Statement"
import * as Rows from "./QueueRows.js"
import { chunks, execWrite, idType, isolated, limitTo, rowsTable } from "./Store.js"
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
  }),
  "8_flow_groups": Effect.gen(function*() {
    const sql = yield* SqlClient
    const id = idType(sql)
    // A flow's group (a tenant), fixed by its first event; null: a group of its own.
    yield* sql`ALTER TABLE relay_flow ADD COLUMN group_id ${id}`
    // A group's turn, and the least eligible_at of its flows (kept by every write of them): claims
    // walk groups in turn order as they walk flows.
    yield* sql`CREATE TABLE relay_group (
      group_id ${id} PRIMARY KEY,
      served BIGINT NOT NULL,
      weight BIGINT NOT NULL,
      burst BIGINT NOT NULL,
      eligible_at BIGINT)`
    yield* sql`CREATE INDEX relay_group_turn ON relay_group (served, group_id) WHERE eligible_at IS NOT NULL`
    // The turn index keeps flows of no group; a group's flows are walked behind its id.
    yield* sql`DROP INDEX relay_flow_turn`
    yield* sql`CREATE INDEX relay_flow_turn ON relay_flow (served, flow_id) WHERE eligible_at IS NOT NULL AND group_id IS NULL`
    yield* sql`CREATE INDEX relay_flow_group_turn ON relay_flow (group_id, served, flow_id)
      WHERE eligible_at IS NOT NULL AND group_id IS NOT NULL`
    // A group's least eligible_at, and whether it has a flow with a head (unacked events).
    yield* sql`CREATE INDEX relay_flow_group ON relay_flow (group_id, eligible_at) WHERE group_id IS NOT NULL AND head_seq IS NOT NULL`
    // A group's flows for operators.
    yield* sql`CREATE INDEX relay_flow_group_id ON relay_flow (group_id, flow_id) WHERE group_id IS NOT NULL`
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
const flowColumns = ["flow_id", "seq", "served", "head_seq", "eligible_at", "weight", "burst", "group_id"]
const groupColumns = ["group_id", "served", "weight", "burst"]

const events = (rows: ReadonlyArray<unknown>) => Effect.map(Rows.decode.events(rows), (decoded) => decoded.map(Rows.toEvent))
const flows = (rows: ReadonlyArray<unknown>) => Effect.map(Rows.decode.flows(rows), (decoded) => decoded.map(Rows.toFlow))
const groups = (rows: ReadonlyArray<unknown>) => Effect.map(Rows.decode.groups(rows), (decoded) => decoded.map(Rows.toGroup))
const audit = (rows: ReadonlyArray<unknown>) => Effect.map(Rows.decode.audit(rows), (decoded) => decoded.map(Rows.toAudit))
const identities = (rows: ReadonlyArray<unknown>) =>
  Effect.map(Rows.decode.identities(rows), (decoded) =>
    decoded.map((row) => ({ eventId: row.event_id, flowId: row.flow_id, seq: row.seq, bodyText: row.body, bodyHash: row.body_hash })))
const { aggregate: aggregates, clock: clocks, counts } = Rows.decode

/** A row's values in `columns` order (one row written by plain parameters). */
const valuesOf = (row: Readonly<Record<string, unknown>>, columns: ReadonlyArray<string>) => columns.map((column) => row[column] ?? null)

/** One statement per part of `rows` that fits the bound-parameter limit (one part for any batch up to thousands). */
const bulk = <A>(rows: ReadonlyArray<A>, columns: number, statement: (part: ReadonlyArray<A>) => Effect.Effect<unknown, SqlError>) => {
  const parts = chunks(rows, columns)
  // Nearly always one statement: `Effect.forEach` would cost more than it does.
  return parts.length === 1 ? Effect.asVoid(statement(parts[0]!)) : Effect.forEach(parts, statement, { discard: true })
}

const candidateColumns = `f.flow_id, f.seq, f.served, f.head_seq, f.eligible_at, f.weight, f.burst, f.group_id,
  e.event_id AS h_event_id, e.body AS h_body, e.state AS h_state, e.next_at AS h_next_at,
  e.lease_until AS h_lease_until, e.generation AS h_generation, e.attempts AS h_attempts,
  e.lifetime_attempts AS h_lifetime_attempts, e.reason AS h_reason`

const decodeCandidates = (rows: ReadonlyArray<unknown>) =>
  Effect.map(Rows.decode.candidates(rows), (decoded) => decoded.map(Rows.toCandidate))

/**
 * The limit of a candidate walk: `limit` when some head is eligible at `now` (one seek of the wake
 * index), else 0. Both databases work out a LIMIT before the walk, and a LIMIT of 0 walks nothing:
 * an idle claim does not walk the flows that wait (as a WHERE term, SQLite would test it per row).
 */
const walkLimit = (store: Store, now: number, limit: number) =>
  store.sql`CASE WHEN (SELECT MIN(eligible_at) FROM relay_flow WHERE eligible_at IS NOT NULL) <= ${now} THEN ${limit} ELSE 0 END`

/** Flows a claim reads of each group before it knows whether it needs more (`byGroupsFirst`). */
const FirstFlowsPerGroup = 8

/**
 * A claim of `limit` heads reads up to `limit` groups, and of each group at first only its first
 * `FirstFlowsPerGroup` flows, not `limit` (a batch of 64 in 40 groups read 2,560 flows and their
 * heads where it takes 64); it walks again with `limit` flows a group only when the rotation took
 * every flow a group offered before its last turn (`Operations.rotationComplete`): with few groups,
 * or a heavy one. Single claims and small batches walk once, as before.
 */
const byGroupsFirst = (walk: (now: number, limit: number, perGroup: number) => Effect.Effect<ReadonlyArray<Candidate>, SqlError>) =>
(now: number, limit: number): Effect.Effect<ReadonlyArray<Candidate>, SqlError> => {
  const perGroup = Math.min(limit, FirstFlowsPerGroup)
  return perGroup === limit ? walk(now, limit, limit) : Effect.flatMap(walk(now, limit, perGroup), (candidates) =>
    rotationComplete(candidates, limit, perGroup) ? Effect.succeed(candidates) : walk(now, limit, limit))
}

/**
 * What a claim of up to `limit` heads chooses from (`Operations.rotate` picks): the first `limit`
 * flows of no group whose head is eligible at `now`, in turn order, and the first `limit` groups
 * with an eligible head, each with its first such flows (`byGroupsFirst`) — every part an ordered
 * index walk that stops at its LIMIT, and none when no head is eligible (`walkLimit`).
 * `+eligible_at` keeps the planner on the turn indexes instead of the wake index (a range over
 * every eligible flow, then a sort). SQLite runs the two parts as two statements (the rows of
 * their `UNION ALL`, in the same order): as one compound statement it runs the first part as a
 * co-routine, which costs more than both statements apart (1.3 ms against 0.9 ms for 64 heads).
 * PostgreSQL runs them as one (one round trip).
 */
export const selectCandidates = (store: Store) => {
  const { sql } = store
  const alone = (now: number, limit: number) =>
    sql`SELECT ${sql.literal(candidateColumns)},
          CAST(NULL AS BIGINT) AS g_served, CAST(NULL AS BIGINT) AS g_weight, CAST(NULL AS BIGINT) AS g_burst
        FROM relay_flow f JOIN relay_event e ON e.flow_id = f.flow_id AND e.seq = f.head_seq
        WHERE f.eligible_at IS NOT NULL AND f.group_id IS NULL AND +f.eligible_at <= ${now}
        ORDER BY f.served, f.flow_id LIMIT ${walkLimit(store, now, limit)}`
  const grouped = (now: number, limit: number, perGroup: number) =>
    sql`SELECT ${sql.literal(candidateColumns)}, g.served AS g_served, g.weight AS g_weight, g.burst AS g_burst
      FROM (SELECT group_id, served, weight, burst FROM relay_group
          WHERE eligible_at IS NOT NULL AND +eligible_at <= ${now} ORDER BY served, group_id LIMIT ${walkLimit(store, now, limit)}) AS g
        JOIN relay_flow f ON f.flow_id IN (SELECT flow_id FROM relay_flow
          WHERE group_id = g.group_id AND eligible_at IS NOT NULL AND group_id IS NOT NULL AND +eligible_at <= ${now}
          ORDER BY served, flow_id ${limitTo(sql, perGroup)})
        JOIN relay_event e ON e.flow_id = f.flow_id AND e.seq = f.head_seq`
  // SQLite sets up the grouped part's subqueries even when it finds no group (~25 µs on a store
  // with none, more than the rest of a claim's reads): it runs only when some group has an
  // eligible head or waits for one (the first entry of the turn index, if any).
  const anyGroup = sql<{ readonly any: number }>`SELECT EXISTS (SELECT 1 FROM relay_group WHERE eligible_at IS NOT NULL) AS any`
  const apart = sql.onDialectOrElse({ sqlite: () => true, orElse: () => false })
  const together = walkTogether(store, false)
  return byGroupsFirst((now, limit, perGroup) =>
    apart
      ? Effect.flatMap(
        Effect.zip(store.exec(alone(now, limit)), store.exec(anyGroup)),
        ([first, [groups]]) =>
          groups?.any !== 1
            ? decodeCandidates(first)
            : Effect.flatMap(store.exec(grouped(now, limit, perGroup)), (second) => decodeCandidates(second.length === 0 ? first : [...first, ...second]))
      )
      : Effect.flatMap(store.exec(together(now, limit, limit, perGroup)), decodeCandidates))
}

/**
 * The PostgreSQL walk as one statement: the first `alone` flows of no group whose head is
 * eligible at `now`, and the first `limit` groups with each group's first `perGroup` such flows.
 * The flows first, then their heads, each head by its key. Joined before the LIMIT, a planner that
 * expects few eligible flows (statistics not yet gathered on a store just filled) read every
 * eligible flow's head and sorted them all to keep one (~110 µs a claim with 64 flows; ~10 µs with
 * the statistics). The heads are read by a LATERAL subquery the planner cannot flatten (OFFSET 0),
 * so whatever it believes of the tables' sizes, it reads the heads of the flows it keeps, one index
 * search each, and never joins the whole event table. The groups first, then each group's flows,
 * then their heads: LATERAL subqueries, so the groups' walk drives the rest. Written as joins, with
 * no statistics on the group table (a store without groups never writes it, so autovacuum never
 * analyzes it) the planner joined every flow to its head before looking at the groups: a claim
 * read the whole event table (`test/postgres/idleClaim.test.ts`). With `lock` (parallel claims,
 * `selectLockedCandidates`), each part locks the rows it reads and skips those another holds; a
 * locking subquery is never flattened either. Made once per store.
 */
const walkTogether = (store: Store, lock: boolean) => {
  const { sql } = store
  const locking = sql.literal(lock ? "FOR UPDATE SKIP LOCKED" : "")
  const headOf = sql.literal(
    `CROSS JOIN LATERAL (SELECT * FROM relay_event WHERE flow_id = f.flow_id AND seq = f.head_seq ${lock ? "FOR UPDATE SKIP LOCKED" : "OFFSET 0"}) AS e`
  )
  return (now: number, alone: number, limit: number, perGroup: number) =>
    sql`SELECT ${sql.literal(candidateColumns)},
          CAST(NULL AS BIGINT) AS g_served, CAST(NULL AS BIGINT) AS g_weight, CAST(NULL AS BIGINT) AS g_burst
        FROM (SELECT * FROM relay_flow
          WHERE eligible_at IS NOT NULL AND group_id IS NULL AND +eligible_at <= ${now}
          ORDER BY served, flow_id LIMIT ${walkLimit(store, now, alone)} ${locking}) AS f
        ${headOf}
      UNION ALL
      SELECT ${sql.literal(candidateColumns)}, g.served AS g_served, g.weight AS g_weight, g.burst AS g_burst
      FROM (SELECT group_id, served, weight, burst FROM relay_group
          WHERE eligible_at IS NOT NULL AND +eligible_at <= ${now}
          ORDER BY served, group_id LIMIT ${walkLimit(store, now, limit)} ${locking}) AS g
        CROSS JOIN LATERAL (SELECT * FROM relay_flow
          WHERE group_id = g.group_id AND eligible_at IS NOT NULL AND group_id IS NOT NULL AND +eligible_at <= ${now}
          ORDER BY served, flow_id LIMIT ${perGroup} ${locking}) AS f
        ${headOf}`
}

/**
 * `ClaimRead` on a store that holds statements (PostgreSQL, exact claims), one held read sent with
 * the settle's (or, for a claim alone, with the clock read): the walk at `now` with the flows of
 * no group `limit` + `ids` deep (`settled` 0),
 * the flows of the events `ids` as rows of the same shape without a head (`settled` 1), and on
 * every row — on a row of its own when there is none of those — the least `eligible_at` after `now`.
 */
const claimRead = (store: Store, execLater: NonNullable<Store["execLater"]>) => {
  const { sql } = store
  const walk = walkTogether(store, false)
  return (now: number, limit: number, ids: ReadonlyArray<EventId>): Effect.Effect<Effect.Effect<ClaimRead, SqlError>, SqlError> => {
    const perGroup = Math.min(limit, FirstFlowsPerGroup)
    // A claim with no settle before it reads no flows of settled events.
    const settledFlows = ids.length === 0 ? sql.literal("") : sql`UNION ALL
        SELECT 1 AS settled, f.flow_id, f.seq, f.served, f.head_seq, f.eligible_at, f.weight, f.burst, f.group_id,
          NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
        FROM relay_flow f WHERE f.flow_id IN (SELECT flow_id FROM relay_event WHERE event_id IN ${sql.in(ids)})`
    const read = sql<{ readonly settled: number | null; readonly flow_id: string | null; readonly due_after: unknown }>`
      SELECT w.*, d.due_after FROM (SELECT MIN(eligible_at) AS due_after FROM relay_flow WHERE eligible_at > ${now}) AS d
      LEFT JOIN LATERAL (
        SELECT 0 AS settled, c.* FROM (${walk(now, limit + ids.length, limit, perGroup)}) AS c
        ${settledFlows}
      ) AS w ON true`
    return Effect.map(execLater(read), (answer) =>
      Effect.flatMap(answer, (rows) => {
        const walked = rows.filter((row) => row.settled === 0)
        const settled = rows.filter((row) => row.settled === 1)
        const due = rows[0]?.due_after
        return Effect.zipWith(decodeCandidates(walked), flows(settled), (candidates, flows): ClaimRead => ({
          candidates,
          perGroup,
          flows,
          dueAfter: due === null || due === undefined ? null : Number(due)
        }))
      }))
  }
}

/**
 * The claim's choice on a store whose writers run side by side (PostgreSQL parallel claims): the
 * same walk as `selectCandidates`' PostgreSQL one — groups first, each group's flows, each flow's
 * head, every part a LATERAL subquery — each part taking only rows no other transaction holds
 * (`SKIP LOCKED`) and locking them as it reads them: a group's row with its flows, so two claims
 * never charge one group's turn at once. Each part stops at its LIMIT counting only the rows it
 * locked, so a claim reads and locks the groups and flows it may take, whatever the planner
 * believes of the tables (joined before the LIMIT, it read every due flow's head on a store not
 * yet analyzed, and every flow of a store of groups on every claim). A row another writer changed
 * after the statement's snapshot is read again as it was committed when locked, and the part's
 * own conditions are checked again on it: each part states the eligibility of the rows it locks.
 * Every writer that holds a head also holds its flow, so a head is never found held once its
 * flow is locked here.
 */
export const selectLockedCandidates = (store: Store) => {
  const walk = walkTogether(store, true)
  return byGroupsFirst((now, limit, perGroup) => Effect.flatMap(store.exec(walk(now, limit, limit, perGroup)), decodeCandidates))
}

/**
 * The columns of rows `v` as a write stores them: `turn`, the expression of the `served` it
 * stores (a backend may decide turns that its statement maps to what it drew: `PgParallel`).
 */
const selectColumns = (columns: ReadonlyArray<string>, turn: string) => columns.map((c) => (c === "served" ? turn : `v.${c}`)).join(", ")

/** Inserts group rows (in id order); `conflict` says what a row already stored gets instead; `turn`, see `writes`. */
export const insertGroups = (store: Store, records: ReadonlyArray<GroupRecord>, conflict: Fragment = store.sql.literal(""), turn = "v.served") => {
  const { sql } = store
  return bulk([...records].sort((a, b) => compareIds(a.groupId, b.groupId)), groupColumns.length, (records) =>
    execWrite(store, sql`INSERT INTO relay_group (${sql.literal(groupColumns.join(", "))})
      SELECT ${sql.literal(selectColumns(groupColumns, turn))}
      FROM ${rowsTable(sql, "relay_group", groupColumns, records.map(Rows.groupRow))} WHERE true ${conflict}`))
}

/** The named groups and whether each has a flow with a head; `lock` ends the statement. */
export const selectGroups = (store: Store, ids: ReadonlyArray<string>, lock: Fragment = store.sql.literal("")) =>
  ids.length === 0 ? Effect.succeed([]) : Effect.flatMap(
    store.exec(store.sql`SELECT g.group_id, g.served, g.weight, g.burst, CASE WHEN EXISTS (SELECT 1 FROM relay_flow f
        WHERE f.group_id = g.group_id AND f.head_seq IS NOT NULL) THEN 1 ELSE 0 END AS active
      FROM relay_group g WHERE g.group_id IN ${store.sql.in(ids)} ORDER BY g.group_id ${lock}`),
    (rows) => Effect.map(Rows.decode.storedGroups(rows), (decoded) => decoded.map(Rows.toStoredGroup))
  )

/**
 * Sets each named group's `eligible_at` to the least of its flows' (what the claim's group walk
 * filters on); run after a write changed those flows.
 */
const refreshGroups = (store: Store, ids: ReadonlyArray<string | null>, lock: boolean) => {
  const named = [...new Set(ids.filter((id): id is string => id !== null))].sort(compareIds)
  if (named.length === 0) return Effect.void
  // Side by side, the group rows are locked first, so the update's snapshot (a new statement's)
  // sees every flow change committed by a writer that refreshed them before.
  const { sql } = store
  return refreshGroupsWhere(store, sql`group_id IN ${sql.in(named)}`, lock)
}

/** Sets `eligible_at` of the groups `which` names (held writes where the backend holds them), after locking them when `lock`. */
const refreshGroupsWhere = (store: Store, which: Fragment, lock: boolean) => {
  const { sql } = store
  return Effect.zipRight(
    lock ? execWrite(store, sql`SELECT group_id FROM relay_group WHERE ${which} ORDER BY group_id FOR UPDATE`) : Effect.void,
    execWrite(
      store,
      sql`UPDATE relay_group SET eligible_at = (SELECT MIN(f.eligible_at) FROM relay_flow f
          WHERE f.group_id = relay_group.group_id AND f.head_seq IS NOT NULL AND f.eligible_at IS NOT NULL)
        WHERE ${which}`
    )
  )
}

/**
 * The queue's reads and writes over an opened SQL store, each one statement (a write of grouped
 * flows adds one that keeps their groups' `eligible_at`, and one that locks those groups first
 * when writers run side by side, `lockGroups`; on a backend that holds writes, a head update adds
 * them whatever the groups, found in SQL). `turn`: the SQL expression of the `served` a flow or
 * group row `v` is stored with (default: as decided, `v.served`).
 */
export const writes = (store: Store, options: { readonly lockGroups?: boolean; readonly turn?: string } = {}): QueueWrites => {
  const { execLater, sql } = store
  const lockGroups = options.lockGroups ?? false
  const turn = options.turn ?? "v.served"
  // The flows' stored columns, read from rows `v`: written once for the store, not per write.
  const flowValues = sql.literal(selectColumns(flowColumns, turn))
  const withNext = (ids: ReadonlyArray<string>) =>
    sql`SELECT 0 AS next, e.* FROM relay_event e WHERE e.event_id IN ${sql.in(ids)}
      UNION ALL SELECT 1 AS next, n.* FROM relay_event e JOIN relay_event n ON n.flow_id = e.flow_id AND n.seq = e.seq + 1
      WHERE e.event_id IN ${sql.in(ids)}`
  const splitNext = (rows: ReadonlyArray<unknown>) => {
    const isNext = (row: unknown) => Number((row as { readonly next: unknown }).next) === 1
    return Effect.zipWith(events(rows.filter((row) => !isNext(row))), events(rows.filter(isNext)), (read, next) => ({ events: read, next }))
  }
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
    // Every write holds the store's lock from its start (SQLite's single writer, PostgreSQL's exact
    // claims): the events after these cannot change before the transaction ends.
    eventsWithNext: (ids) => (ids.length === 0 ? Effect.succeed({ events: [], next: [] }) : Effect.flatMap(store.exec(withNext(ids)), splitNext)),
    startSettleRead: execLater === undefined ? undefined : (ids) =>
      ids.length === 0
        ? Effect.succeed(Effect.succeed({ events: [], next: [] }))
        : Effect.map(execLater(withNext(ids)), (rows) => Effect.flatMap(rows, splitNext)),
    startClaimRead: execLater === undefined ? undefined : claimRead(store, execLater),
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
    groups: (ids) => selectGroups(store, ids),
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
        } ORDER BY event_id ${limitTo(sql, query.limit)}`),
        events
      ),
    listFlows: (query: FlowQuery) => {
      const group = query.group === undefined ? [] : [sql`group_id = ${query.group}`]
      return Effect.flatMap(
        query.order === "id"
          ? store.exec(sql`SELECT * FROM relay_flow WHERE ${
            sql.and([...group, ...(query.after === undefined ? [] : [sql`flow_id > ${query.after}`])])
          } ORDER BY flow_id ${limitTo(sql, query.limit)}`)
          : store.exec(sql`SELECT * FROM relay_flow WHERE ${
            sql.and([
              ...group,
              ...(query.after === undefined
                ? []
                : [sql`(served > ${query.after.served} OR (served = ${query.after.served} AND flow_id > ${query.after.flowId}))`])
            ])
          } ORDER BY served, flow_id ${limitTo(sql, query.limit)}`),
        flows
      )
    },
    listGroups: (query) =>
      Effect.flatMap(
        store.exec(sql`SELECT g.group_id, g.served, g.weight, g.burst,
            (SELECT COUNT(*) FROM relay_flow f WHERE f.group_id = g.group_id) AS flows,
            (SELECT COUNT(*) FROM relay_flow f WHERE f.group_id = g.group_id AND f.head_seq IS NOT NULL) AS waiting
          FROM relay_group g WHERE ${query.after === undefined ? sql.literal("1 = 1") : sql`g.group_id > ${query.after}`}
          ORDER BY g.group_id ${limitTo(sql, query.limit)}`),
        (rows) => Effect.map(Rows.decode.groupViews(rows), (decoded) => decoded.map(Rows.toGroupView))
      ),
    listAudit: (query) =>
      Effect.flatMap(
        store.exec(sql`SELECT * FROM relay_audit WHERE ${query.eventId === undefined ? sql.literal("1 = 1") : sql`event_id = ${query.eventId}`}
          ORDER BY id ${query.limit === undefined ? sql.literal("") : limitTo(sql, query.limit)}`),
        audit
      ),
    dump: Effect.all({
      flows: Effect.flatMap(store.exec(sql`SELECT * FROM relay_flow ORDER BY flow_id`), flows),
      groups: Effect.flatMap(store.exec(sql`SELECT * FROM relay_group ORDER BY group_id`), groups),
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
          WHERE state = 'acked' AND acked_at <= ${cutoff} ORDER BY acked_at ${limitTo(sql, limit)}`),
        (rows) => Effect.map(Rows.decode.pruneCandidates(rows), (decoded) => decoded.map(Rows.toPruneCandidate))
      ),
    countPrunable: (eventCutoff, dedupCutoff, limit) =>
      Effect.all({
        events: eventCutoff === null ? Effect.succeed(0) : Effect.flatMap(
          store.exec(sql`SELECT NULL AS at, COUNT(*) AS n FROM (SELECT 1 AS one FROM relay_event
            WHERE state = 'acked' AND acked_at <= ${eventCutoff} ${limitTo(sql, limit)}) AS due`),
          (rows) => Effect.map(aggregates(rows), ([row]) => row?.n ?? 0)
        ),
        dedup: dedupCutoff === null ? Effect.succeed(0) : Effect.flatMap(
          store.exec(sql`SELECT NULL AS at, COUNT(*) AS n FROM (SELECT 1 AS one FROM relay_pruned WHERE pruned_at <= ${dedupCutoff} ${limitTo(sql, limit)}) AS due`),
          (rows) => Effect.map(aggregates(rows), ([row]) => row?.n ?? 0)
        )
      }),

    setClock: (clock) => execWrite(store, sql`UPDATE relay_clock SET tick = ${clock.tick}, ticket = ${clock.ticket} WHERE id = 1`),
    insertEvents: (rows) =>
      bulk(rows, insertColumns.length, (rows) =>
        execWrite(store, sql`INSERT INTO relay_event (${sql.literal(insertColumns.join(", "))})
          SELECT ${sql.literal(insertColumns.map((c) => `v.${c}`).join(", "))}
          FROM ${rowsTable(sql, "relay_event", insertColumns, rows.map(Rows.eventInsert))}`)
      ),
    updateEvents: (records: ReadonlyArray<EventRecord>, acked = []) => {
      const ackedAt = new Map(acked.map((a): [string, number] => [a.eventId, a.ackedAt]))
      // An acked event keeps the ack time it has; any other state has none.
      if (records.length === 1) {
        const row = Rows.eventUpdate(records[0]!)
        return execWrite(store, sql`UPDATE relay_event SET state = ${row.state}, next_at = ${row.next_at}, lease_until = ${row.lease_until},
            generation = ${row.generation}, attempts = ${row.attempts}, lifetime_attempts = ${row.lifetime_attempts}, reason = ${row.reason},
            acked_at = CASE WHEN ${row.state} = 'acked' THEN COALESCE(${ackedAt.get(row.event_id) ?? null}, acked_at) END
          WHERE event_id = ${row.event_id}`)
      }
      return bulk(records, updateColumns.length, (records) =>
        execWrite(store, sql`UPDATE relay_event SET state = v.state, next_at = v.next_at, lease_until = v.lease_until,
            generation = v.generation, attempts = v.attempts, lifetime_attempts = v.lifetime_attempts, reason = v.reason,
            acked_at = CASE WHEN v.state = 'acked' THEN COALESCE(v.acked_at, relay_event.acked_at) END
          FROM ${
          rowsTable(sql, "relay_event", updateColumns, records.map((e) => ({ ...Rows.eventUpdate(e), acked_at: ackedAt.get(e.eventId) ?? null })))
        }
          WHERE relay_event.event_id = v.event_id`)
      )
    },
    putGroups: (records) =>
      insertGroups(store, records, sql`ON CONFLICT (group_id) DO UPDATE SET served = excluded.served, weight = excluded.weight, burst = excluded.burst`, turn),
    putFlows: (records: ReadonlyArray<FlowRecord>) =>
      Effect.zipRight(
        bulk(records, flowColumns.length, (records) => {
          // `WHERE true` tells SQLite's parser that ON CONFLICT belongs to the INSERT, not a join.
          const rows = records.length === 1 && options.turn === undefined
            ? sql`VALUES ${sql.in(valuesOf(Rows.flowRow(records[0]!), flowColumns))}`
            : sql`SELECT ${flowValues}
              FROM ${rowsTable(sql, "relay_flow", flowColumns, records.map(Rows.flowRow))} WHERE true`
          return execWrite(store, sql`INSERT INTO relay_flow (${sql.literal(flowColumns.join(", "))}) ${rows}
            ON CONFLICT (flow_id) DO UPDATE SET seq = excluded.seq, served = excluded.served, head_seq = excluded.head_seq,
              eligible_at = excluded.eligible_at, weight = excluded.weight, burst = excluded.burst, group_id = excluded.group_id`)
        }),
        Effect.suspend(() => refreshGroups(store, records.map((f) => f.group), lockGroups))
      ),
    setHeads: (heads: ReadonlyArray<Head>) => {
      // The head update: one row by its key, more as a join.
      const update = (heads: ReadonlyArray<Head>, returning: Fragment) => {
        const [head] = heads
        return heads.length === 1
          ? sql`UPDATE relay_flow SET head_seq = ${head!.headSeq}, eligible_at = ${head!.eligibleAt} WHERE flow_id = ${head!.flowId} ${returning}`
          : sql`UPDATE relay_flow SET head_seq = v.head_seq, eligible_at = v.eligible_at
              FROM ${
            rowsTable(sql, "relay_flow", ["flow_id", "head_seq", "eligible_at"], heads.map((h) => ({ flow_id: h.flowId, head_seq: h.headSeq, eligible_at: h.eligibleAt })))
          } WHERE relay_flow.flow_id = v.flow_id ${returning}`
      }
      // A backend that holds writes sends the update and its groups' refresh with what follows
      // (the groups found in SQL: nothing to wait for); any other reads each flow's group back
      // from the update, and refreshes those groups only.
      if (store.execWrite !== undefined) {
        return Effect.zipRight(
          bulk(heads, 3, (heads) => execWrite(store, update(heads, sql.literal("")))),
          refreshGroupsWhere(
            store,
            sql`group_id IN (SELECT group_id FROM relay_flow WHERE flow_id IN ${sql.in(heads.map((h) => h.flowId))} AND group_id IS NOT NULL)`,
            lockGroups
          )
        )
      }
      const grouped: Array<string | null> = []
      return Effect.zipRight(
        bulk(heads, 3, (heads) =>
          Effect.map(
            store.exec(update(heads, sql.literal("RETURNING relay_flow.group_id"))),
            (rows) => grouped.push(...rows.map((row) => (row as { readonly group_id: string | null }).group_id))
          )),
        Effect.suspend(() => refreshGroups(store, grouped, lockGroups))
      )
    },
    appendAudit: (record) =>
      execWrite(
        store,
        sql`INSERT INTO relay_audit (event_id, reason, generation, tick, actor)
          VALUES (${record.eventId}, ${record.reason}, ${record.generation}, ${record.tick}, ${record.actor})`
      ),
    putDedup: (records) =>
      bulk(records, dedupColumns.length, (records) =>
        execWrite(store, sql`INSERT INTO relay_pruned (${sql.literal(dedupColumns.join(", "))})
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
            SELECT event_id FROM relay_pruned WHERE pruned_at <= ${cutoff} ORDER BY pruned_at ${limitTo(sql, limit)}) RETURNING event_id`),
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
