/**
 * The queue over SQL, shared by every SQL backend: the reads and writes the protocol asks for
 * (`QueueBackend`) over an opened store, its schema being `QueueSchema`'s and a claim's reads
 * `QueueWalk`'s. No decision is made here — `RelayQueue.make` decides. Each read or write is one
 * statement whatever the batch size (up to the bound-parameter limit): bulk writes pass their rows
 * as a table (`Store.rowsTable`: bound `VALUES` on SQLite, one JSON parameter on PostgreSQL).
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Effect, Exit, Schema } from "effect"
import type { FlowId, GroupId } from "../../domain/Ids.js"
import type { Head } from "../../domain/Operations.js"
import { StoredSettings } from "../../domain/Policy.js"
import type { PolicyInput, RelayPolicy } from "../../domain/Policy.js"
import { compareIds } from "../../domain/Protocol.js"
import type { EventRecord, FlowRecord, GroupRecord } from "../../domain/Records.js"
import type { EventQuery, FlowQuery, Position, QueueBackend, QueueWrites } from "../../services/QueueBackend.js"
import * as RelayQueue from "../../services/RelayQueue.js"
import type { Retention } from "../../services/Retention.js"
import type { Row } from "@effect/sql/SqlConnection"
import type { Fragment } from "@effect/sql/Statement"
import * as Rows from "./QueueRows.js"
import { resolvePolicy } from "./QueueSchema.js"
import { selectCandidates, unpaused, unpausedMin } from "./QueueWalk.js"
import { chunks, execWrite, insertRows, isolated, isPostgres, limitTo, query, rowsTable } from "./Store.js"
import type { Store } from "./Store.js"

const eventColumns = ["event_id", "state", "next_at", "lease_until", "generation", "attempts", "lifetime_attempts", "reason"]
const insertColumns = [...eventColumns, "flow_id", "seq", "body"]
const updateColumns = [...eventColumns, "acked_at"]
const dedupColumns = ["event_id", "flow_id", "seq", "body_hash", "pruned_at"]
const flowColumns = ["flow_id", "seq", "served", "head_seq", "eligible_at", "weight", "burst", "group_id"]
const groupColumns = ["group_id", "served", "weight", "burst"]

const { audit, events, flowViews, flows, groups } = Rows.records
// A row written before retention was kept has none: it decodes to settings without a retention.
const decodeProtocol = Schema.decodeUnknownEither(Schema.parseJson(StoredSettings))

const identities = (rows: ReadonlyArray<unknown>) =>
  Exit.map(Rows.decode.identities(rows), (decoded) =>
    decoded.map((row) => ({ eventId: row.event_id, flowId: row.flow_id, seq: row.seq, bodyText: row.body, bodyHash: row.body_hash })))
const { aggregate: aggregates, clock: clocks, counts } = Rows.decode
/** The `n` of an aggregate read's one row. */
const countOf = (rows: ReadonlyArray<unknown>) => Exit.map(aggregates(rows), ([row]) => row?.n ?? 0)
/** How many rows a statement returned (a `DELETE … RETURNING`'s deleted rows). */
const rowCount = (rows: ReadonlyArray<unknown>) => Exit.succeed(rows.length)

/** One statement per part of `rows` that fits the bound-parameter limit (one part for any batch up to thousands). */
const bulk = <A>(rows: ReadonlyArray<A>, columns: number, statement: (part: ReadonlyArray<A>) => Effect.Effect<void, SqlError>) => {
  const parts = chunks(rows, columns)
  // Nearly always one statement: `Effect.forEach` would cost more than it does.
  return parts.length === 1 ? statement(parts[0]!) : Effect.forEach(parts, statement, { discard: true })
}

/** Inserts group rows (in id order); `conflict` says what a row already stored gets instead. */
export const insertGroups = (store: Store, records: ReadonlyArray<GroupRecord>, conflict: Fragment = store.sql.literal("")) => {
  const { sql } = store
  return bulk([...records].sort((a, b) => compareIds(a.groupId, b.groupId)), groupColumns.length, (records) =>
    execWrite(store, sql`INSERT INTO relay_group (${sql.literal(groupColumns.join(", "))})
      ${insertRows(sql, "relay_group", groupColumns, records.map(Rows.groupRow))} ${conflict}`))
}

/** The named groups and whether each has a flow with a head; `lock` ends the statement. */
export const selectGroups = (store: Store, ids: ReadonlyArray<string>, lock: Fragment = store.sql.literal("")) =>
  ids.length === 0 ? Effect.succeed([]) : query(
    store,
    store.sql`SELECT g.group_id, g.served, g.weight, g.burst, CASE WHEN EXISTS (SELECT 1 FROM relay_flow f
        WHERE f.group_id = g.group_id AND f.head_seq IS NOT NULL) THEN 1 ELSE 0 END AS active
      FROM relay_group g WHERE g.group_id IN ${store.sql.in(ids)} ORDER BY g.group_id ${lock}`,
    Rows.records.storedGroups
  )

/**
 * Sets each named group's `eligible_at` to the least of its flows' (what the claim's group walk
 * filters on); run after a write changed those flows. Undefined where `ids` name no group: the
 * write then runs alone, without a step for nothing.
 */
const refreshGroups = (store: Store, ids: ReadonlyArray<string | null>, lock: boolean): Effect.Effect<void, SqlError> | undefined => {
  const named = [...new Set(ids.filter((id): id is string => id !== null))].sort(compareIds)
  if (named.length === 0) return undefined
  // Side by side, the group rows are locked first, so the update's snapshot (a new statement's)
  // sees every flow change committed by a writer that refreshed them before.
  const { sql } = store
  return refreshGroupsWhere(store, sql`group_id IN ${sql.in(named)}`, lock)
}

/** Sets `eligible_at` of the groups `which` names (held writes where the backend holds them), after locking them when `lock`. */
const refreshGroupsWhere = (store: Store, which: Fragment, lock: boolean) => {
  const { sql } = store
  const update = execWrite(
    store,
    sql`UPDATE relay_group SET eligible_at = (SELECT MIN(f.eligible_at) FROM relay_flow f
        WHERE f.group_id = relay_group.group_id AND f.head_seq IS NOT NULL AND f.eligible_at IS NOT NULL AND f.paused = 0)
      WHERE ${which}`
  )
  return lock ? Effect.zipRight(execWrite(store, sql`SELECT group_id FROM relay_group WHERE ${which} ORDER BY group_id FOR UPDATE`), update) : update
}

/**
 * The queue's reads and writes over an opened SQL store, each one statement (a write of grouped
 * flows adds one that keeps their groups' `eligible_at`, and one that locks those groups first
 * when writers run side by side, `lockGroups`; on a backend that holds writes, a head update adds
 * them whatever the groups, found in SQL).
 */
export const writes = (store: Store, options: { readonly lockGroups?: boolean } = {}): QueueWrites => {
  const { sql } = store
  const lockGroups = options.lockGroups ?? false
  const withNext = (ids: ReadonlyArray<string>) =>
    sql`SELECT 0 AS next, e.* FROM relay_event e WHERE e.event_id IN ${sql.in(ids)}
      UNION ALL SELECT 1 AS next, n.* FROM relay_event e JOIN relay_event n ON n.flow_id = e.flow_id AND n.seq = e.seq + 1
      WHERE e.event_id IN ${sql.in(ids)}`
  const splitNext = (rows: ReadonlyArray<Row>) => {
    const isNext = (row: Row) => Number(row["next"]) === 1
    return Exit.map(Exit.zip(events(rows.filter((row) => !isNext(row))), events(rows.filter(isNext))), ([read, next]) => ({ events: read, next }))
  }
  return {
    now: store.now,
    clock: query(store, sql`SELECT tick, ticket FROM relay_clock WHERE id = 1`, (rows) => Exit.map(clocks(rows), (decoded) => decoded[0]!)),
    wakeAt: query(store, sql`SELECT ${unpausedMin(sql, sql`eligible_at IS NOT NULL`)} AS at`, (rows) => Exit.map(aggregates(rows), ([row]) => row!.at)),
    candidates: selectCandidates(store),
    events: (ids) => ids.length === 0 ? Effect.succeed([]) : query(store, sql`SELECT * FROM relay_event WHERE event_id IN ${sql.in(ids)}`, events),
    // Every write holds the store's lock from its start (SQLite's single writer, PostgreSQL's exact
    // claims): the events after these cannot change before the transaction ends.
    eventsWithNext: (ids) => (ids.length === 0 ? Effect.succeed({ events: [], next: [] }) : query(store, withNext(ids), splitNext)),
    identities: (ids) =>
      ids.length === 0 ? Effect.succeed([]) : query(
        store,
        sql`SELECT event_id, flow_id, seq, body, NULL AS body_hash FROM relay_event WHERE event_id IN ${sql.in(ids)}
          UNION ALL SELECT event_id, flow_id, seq, NULL AS body, body_hash FROM relay_pruned WHERE event_id IN ${sql.in(ids)}`,
        identities
      ),
    eventsAt: (positions: ReadonlyArray<Position>) =>
      positions.length === 0 ? Effect.succeed([]) : query(
        store,
        sql`SELECT e.* FROM ${
          rowsTable(sql, "relay_event", ["flow_id", "seq"], positions.map((p) => ({ flow_id: p.flowId, seq: p.seq })))
        } JOIN relay_event e ON e.flow_id = v.flow_id AND e.seq = v.seq`,
        events
      ),
    flows: (ids: ReadonlyArray<FlowId>) =>
      ids.length === 0 ? Effect.succeed([]) : query(store, sql`SELECT * FROM relay_flow WHERE flow_id IN ${sql.in(ids)}`, flows),
    groups: (ids) => selectGroups(store, ids),
    reachingBeyond: (nextAtAfter, leaseAfter) =>
      query(
        store,
        sql`SELECT * FROM relay_event WHERE (state = 'ready' AND next_at > ${nextAtAfter})
          OR (state = 'inflight' AND lease_until > ${leaseAfter})`,
        events
      ),
    listEvents: (filter: EventQuery) =>
      query(
        store,
        sql`SELECT * FROM relay_event WHERE ${
          sql.and([
            ...(filter.state === undefined ? [] : [sql`state = ${filter.state}`]),
            ...(filter.flowId === undefined ? [] : [sql`flow_id = ${filter.flowId}`]),
            ...(filter.afterEventId === undefined ? [] : [sql`event_id > ${filter.afterEventId}`]),
            ...(filter.afterSeq === undefined ? [] : [sql`seq > ${filter.afterSeq}`])
          ])
        } ORDER BY ${filter.flowId === undefined ? sql`event_id` : sql`seq`} ${limitTo(sql, filter.limit)}`,
        events
      ),
    quarantinedHeads: (filter, after, limit) => {
      const conditions = [
        ...(filter.group === undefined ? [] : [sql`f.group_id = ${filter.group}`]),
        ...(filter.flowId === undefined ? [] : [sql`e.flow_id = ${filter.flowId}`]),
        ...(filter.flowPrefix === undefined ? [] : [sql`substr(e.flow_id, 1, ${[...filter.flowPrefix].length}) = ${filter.flowPrefix}`]),
        ...(filter.reasonContains === undefined
          ? []
          : [isPostgres(sql) ? sql`strpos(e.reason, ${filter.reasonContains}) > 0` : sql`instr(e.reason, ${filter.reasonContains}) > 0`]),
        ...(filter.quarantinedBefore === undefined ? [] : [sql`e.next_at <= ${filter.quarantinedBefore}`]),
        ...(filter.quarantinedAfter === undefined ? [] : [sql`e.next_at >= ${filter.quarantinedAfter}`]),
        ...(after === undefined ? [] : [sql`e.event_id > ${after}`])
      ]
      // A quarantined head is a flow's head whose flow waits for nothing (eligible_at null): found
      // from the flows, not by scanning every event.
      return query(
        store,
        sql<{ readonly head_group: GroupId | null }>`SELECT e.*, f.group_id AS head_group FROM relay_flow f JOIN relay_event e ON e.flow_id = f.flow_id AND e.seq = f.head_seq
          WHERE ${sql.and([sql`f.head_seq IS NOT NULL AND f.eligible_at IS NULL AND e.state = 'quarantined'`, ...conditions])}
          ORDER BY e.event_id ${limitTo(sql, limit)}`,
        (rows) =>
          Exit.map(events(rows), (decoded) =>
            decoded.map((event, i) => ({ event, group: rows[i]!.head_group })))
      )
    },
    protocol: query(store, sql<{ readonly protocol: string; readonly version: unknown }>`SELECT protocol, version FROM relay_settings WHERE id = 1`, (rows) => {
      const [row] = rows
      if (row === undefined) return Exit.succeed(undefined)
      const settings = decodeProtocol(row.protocol)
      // Settings this library wrote that no longer decode: a store we cannot trust (as a row that does not decode).
      if (settings._tag === "Left") return Exit.die(settings.left)
      const { retention, ...protocol } = settings.right
      return Exit.succeed({ settings: protocol, retention, version: Number(row.version) })
    }),
    countPaused: query(
      store,
      sql`SELECT (SELECT COUNT(*) FROM relay_flow WHERE paused <> 0) AS at, (SELECT COUNT(*) FROM relay_group WHERE paused <> 0) AS n`,
      (rows) => Exit.map(aggregates(rows), ([row]) => ({ flows: row!.at ?? 0, groups: row!.n ?? 0 }))
    ),
    listFlows: (filter: FlowQuery) => {
      const group = filter.group === undefined ? [] : [sql`group_id = ${filter.group}`]
      return query(
        store,
        filter.order === "id"
          ? sql`SELECT * FROM relay_flow WHERE ${
            sql.and([...group, ...(filter.after === undefined ? [] : [sql`flow_id > ${filter.after}`])])
          } ORDER BY flow_id ${limitTo(sql, filter.limit)}`
          : sql`SELECT * FROM relay_flow WHERE ${
            sql.and([
              ...group,
              ...(filter.after === undefined
                ? []
                : [sql`(served > ${filter.after.served} OR (served = ${filter.after.served} AND flow_id > ${filter.after.flowId}))`])
            ])
          } ORDER BY served, flow_id ${limitTo(sql, filter.limit)}`,
        flowViews
      )
    },
    listGroups: (filter) =>
      query(
        store,
        sql`SELECT g.group_id, g.served, g.weight, g.burst, g.paused,
            (SELECT COUNT(*) FROM relay_flow f WHERE f.group_id = g.group_id) AS flows,
            (SELECT COUNT(*) FROM relay_flow f WHERE f.group_id = g.group_id AND f.head_seq IS NOT NULL) AS waiting
          FROM relay_group g WHERE ${filter.after === undefined ? sql.literal("1 = 1") : sql`g.group_id > ${filter.after}`}
          ORDER BY g.group_id ${limitTo(sql, filter.limit)}`,
        Rows.records.groupViews
      ),
    listAudit: (filter) =>
      query(
        store,
        sql`SELECT * FROM relay_audit WHERE ${filter.eventId === undefined ? sql.literal("1 = 1") : sql`event_id = ${filter.eventId}`}
          ORDER BY id ${filter.limit === undefined ? sql.literal("") : limitTo(sql, filter.limit)}`,
        audit
      ),
    dump: Effect.all({
      flows: query(store, sql`SELECT * FROM relay_flow ORDER BY flow_id`, flows),
      groups: query(store, sql`SELECT * FROM relay_group ORDER BY group_id`, groups),
      events: query(store, sql`SELECT * FROM relay_event ORDER BY flow_id, seq`, events),
      audit: query(store, sql`SELECT * FROM relay_audit ORDER BY id`, audit)
    }),
    // One scan for both: the claims ride along the count the scan makes anyway.
    countByState: query(
      store,
      sql`SELECT state, COUNT(*) AS n, COALESCE(SUM(lifetime_attempts), 0) AS claims FROM relay_event GROUP BY state`,
      (rows) =>
        Exit.map(counts(rows), (decoded) => {
          const byState = { ready: 0, inflight: 0, acked: 0, quarantined: 0, discarded: 0 }
          let claims = 0
          for (const row of decoded) {
            byState[row.state] = row.n
            claims += row.claims
          }
          return { byState, claims }
        })
    ),
    eligibleHeads: (now) =>
      query(
        store,
        sql`SELECT MIN(eligible_at) AS at, COUNT(*) AS n FROM relay_flow WHERE eligible_at IS NOT NULL AND eligible_at <= ${now}
          AND ${unpaused(sql)}`,
        (rows) => Exit.map(aggregates(rows), ([row]) => ({ count: row!.n ?? 0, oldest: row!.at }))
      ),
    pruneCandidates: (cutoff, limit) =>
      query(
        store,
        sql`SELECT event_id, flow_id, seq, state, acked_at, body FROM relay_event
          WHERE state IN ('acked', 'discarded') AND acked_at <= ${cutoff} ORDER BY acked_at ${limitTo(sql, limit)}`,
        Rows.records.pruneCandidates
      ),
    countPrunable: (eventCutoff, dedupCutoff, limit) =>
      Effect.all({
        events: eventCutoff === null ? Effect.succeed(0) : query(
          store,
          sql`SELECT NULL AS at, COUNT(*) AS n FROM (SELECT 1 AS one FROM relay_event
            WHERE state IN ('acked', 'discarded') AND acked_at <= ${eventCutoff} ${limitTo(sql, limit)}) AS due`,
          countOf
        ),
        dedup: dedupCutoff === null ? Effect.succeed(0) : query(
          store,
          sql`SELECT NULL AS at, COUNT(*) AS n FROM (SELECT 1 AS one FROM relay_pruned WHERE pruned_at <= ${dedupCutoff} ${limitTo(sql, limit)}) AS due`,
          countOf
        )
      }),

    setClock: (clock) => execWrite(store, sql`UPDATE relay_clock SET tick = ${clock.tick}, ticket = ${clock.ticket} WHERE id = 1`),
    insertEvents: (rows) =>
      bulk(rows, insertColumns.length, (rows) =>
        execWrite(store, sql`INSERT INTO relay_event (${sql.literal(insertColumns.join(", "))})
          ${insertRows(sql, "relay_event", insertColumns, rows.map(Rows.eventInsert))}`)
      ),
    updateEvents: (records: ReadonlyArray<EventRecord>, acked = []) => {
      const ackedAt = new Map(acked.map((a): [string, number] => [a.eventId, a.ackedAt]))
      // An acked (discarded) event keeps the time it has; any other state has none.
      if (records.length === 1) {
        const row = Rows.eventUpdate(records[0]!)
        return execWrite(store, sql`UPDATE relay_event SET state = ${row.state}, next_at = ${row.next_at}, lease_until = ${row.lease_until},
            generation = ${row.generation}, attempts = ${row.attempts}, lifetime_attempts = ${row.lifetime_attempts}, reason = ${row.reason},
            acked_at = CASE WHEN ${row.state} IN ('acked', 'discarded') THEN COALESCE(${ackedAt.get(row.event_id) ?? null}, acked_at) END
          WHERE event_id = ${row.event_id}`)
      }
      return bulk(records, updateColumns.length, (records) =>
        execWrite(store, sql`UPDATE relay_event SET state = v.state, next_at = v.next_at, lease_until = v.lease_until,
            generation = v.generation, attempts = v.attempts, lifetime_attempts = v.lifetime_attempts, reason = v.reason,
            acked_at = CASE WHEN v.state IN ('acked', 'discarded') THEN COALESCE(v.acked_at, relay_event.acked_at) END
          FROM ${
          rowsTable(sql, "relay_event", updateColumns, records.map((e) => Object.assign(Rows.eventUpdate(e), { acked_at: ackedAt.get(e.eventId) ?? null })))
        }
          WHERE relay_event.event_id = v.event_id`)
      )
    },
    putGroups: (records) =>
      insertGroups(store, records, sql`ON CONFLICT (group_id) DO UPDATE SET served = excluded.served, weight = excluded.weight, burst = excluded.burst`),
    putFlows: (records: ReadonlyArray<FlowRecord>) => {
      const insert = bulk(records, flowColumns.length, (records) =>
        execWrite(store, sql`INSERT INTO relay_flow (${sql.literal(flowColumns.join(", "))})
          ${insertRows(sql, "relay_flow", flowColumns, records.map(Rows.flowRow))}
          ON CONFLICT (flow_id) DO UPDATE SET seq = excluded.seq, served = excluded.served, head_seq = excluded.head_seq,
            eligible_at = excluded.eligible_at, weight = excluded.weight, burst = excluded.burst, group_id = excluded.group_id`))
      const refresh = refreshGroups(store, records.map((f) => f.group), lockGroups)
      return refresh === undefined ? insert : Effect.zipRight(insert, refresh)
    },
    setHeads: (heads: ReadonlyArray<Head>, ungrouped = false) => {
      // The head update: one row by its key, more as a join.
      const update = <A extends object = Row>(heads: ReadonlyArray<Head>, returning: Fragment) => {
        const [head] = heads
        return heads.length === 1
          ? sql<A>`UPDATE relay_flow SET head_seq = ${head!.headSeq}, eligible_at = ${head!.eligibleAt} WHERE flow_id = ${head!.flowId} ${returning}`
          : sql<A>`UPDATE relay_flow SET head_seq = v.head_seq, eligible_at = v.eligible_at
              FROM ${
            rowsTable(sql, "relay_flow", ["flow_id", "head_seq", "eligible_at"], heads.map((h) => ({ flow_id: h.flowId, head_seq: h.headSeq, eligible_at: h.eligibleAt })))
          } WHERE relay_flow.flow_id = v.flow_id ${returning}`
      }
      // Flows of no group: their heads alone. Any other: each flow's group read back from the
      // update, and those groups refreshed only.
      if (ungrouped) return bulk(heads, 3, (heads) => execWrite(store, update(heads, sql.literal(""))))
      const grouped: Array<string | null> = []
      return Effect.flatMap(
        bulk(heads, 3, (heads) =>
          query(store, update<{ readonly group_id: string | null }>(heads, sql.literal("RETURNING relay_flow.group_id")), (rows) => {
            grouped.push(...rows.map((row) => row.group_id))
            return Exit.void
          })),
        () => refreshGroups(store, grouped, lockGroups) ?? Effect.void
      )
    },
    appendAudit: (record) =>
      execWrite(
        store,
        sql`INSERT INTO relay_audit (event_id, reason, generation, tick, actor, action, target)
          VALUES (${record.eventId}, ${record.reason}, ${record.generation}, ${record.tick}, ${record.actor}, ${record.action}, ${record.target})`
      ),
    setResume: (flowId, resume) =>
      execWrite(store, sql`UPDATE relay_flow SET resume_seq = ${resume.seq}, resume_after = ${resume.after} WHERE flow_id = ${flowId}`),
    setPaused: (target, paused) => {
      const flag = paused ? 1 : 0
      type Paused = { readonly paused: unknown; readonly group_id: string | null }
      // Read, then changed (an operator's write: not worth one statement that answers the old value on both databases).
      const [read, update] = "group" in target
        ? [
          sql<Paused>`SELECT paused, group_id FROM relay_group WHERE group_id = ${target.group}`,
          sql`UPDATE relay_group SET paused = ${flag} WHERE group_id = ${target.group}`
        ]
        : [
          sql<Paused>`SELECT paused, group_id FROM relay_flow WHERE flow_id = ${target.flowId}`,
          sql`UPDATE relay_flow SET paused = ${flag} WHERE flow_id = ${target.flowId}`
        ]
      return Effect.flatMap(query(store, read, Exit.succeed), ([row]) => {
        if (row === undefined) return Effect.succeed(undefined)
        const was = Number(row.paused) !== 0
        // A flow's pause changes what its group offers: a group's eligible_at is kept over its flows not paused.
        const refresh = "group" in target ? undefined : refreshGroups(store, [row.group_id], lockGroups)
        const write = execWrite(store, update)
        return Effect.as(refresh === undefined ? write : Effect.zipRight(write, refresh), was)
      })
    },
    setProtocol: ({ retention, settings, version }) =>
      execWrite(
        store,
        sql`UPDATE relay_settings SET protocol = ${JSON.stringify(retention === undefined ? settings : { ...settings, retention })}, version = ${version} WHERE id = 1`
      ),
    putDedup: (records) =>
      bulk(records, dedupColumns.length, (records) =>
        execWrite(store, sql`INSERT INTO relay_pruned (${sql.literal(dedupColumns.join(", "))})
          ${insertRows(sql, "relay_pruned", dedupColumns, records.map(Rows.dedupRow))}
          ON CONFLICT (event_id) DO UPDATE SET flow_id = excluded.flow_id, seq = excluded.seq,
            body_hash = excluded.body_hash, pruned_at = excluded.pruned_at`)
      ),
    deleteAcked: (ids) =>
      ids.length === 0 ? Effect.succeed(0) : query(
        store,
        sql`DELETE FROM relay_event WHERE event_id IN ${sql.in(ids)} AND state IN ('acked', 'discarded') RETURNING event_id`,
        rowCount
      ),
    deleteDedup: (cutoff, limit) =>
      query(
        store,
        sql`DELETE FROM relay_pruned WHERE event_id IN (
            SELECT event_id FROM relay_pruned WHERE pruned_at <= ${cutoff} ORDER BY pruned_at ${limitTo(sql, limit)}) RETURNING event_id`,
        rowCount
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
) => Effect.map(resolvePolicy(store, requested, input, name, mode), (policy) => RelayQueue.make(backend(store), policy, retention))
