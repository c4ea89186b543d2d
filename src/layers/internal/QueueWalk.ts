/**
 * What a claim reads to choose from where the queue decides it (SQLite; PostgreSQL decides claims
 * in its server functions): the candidate walk over the turn indexes (flows of no group, then
 * groups and their flows, each with its head), and the least `eligible_at` of the flows a claim
 * may take.
 */
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import { rotationComplete } from "../../domain/Operations.js"
import type { Candidate } from "../../domain/Operations.js"
import * as Rows from "./QueueRows.js"
import { limitTo, query } from "./Store.js"
import type { Store } from "./Store.js"
import type { Fragment } from "@effect/sql/Statement"

const candidateColumns = `f.flow_id, f.seq, f.served, f.head_seq, f.eligible_at, f.weight, f.burst, f.group_id, f.resume_seq, f.resume_after,
  e.event_id AS h_event_id, e.body AS h_body, e.state AS h_state, e.next_at AS h_next_at,
  e.lease_until AS h_lease_until, e.generation AS h_generation, e.attempts AS h_attempts,
  e.lifetime_attempts AS h_lifetime_attempts, e.reason AS h_reason`

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
 * every eligible flow, then a sort). The two parts run as two statements (the rows of their
 * `UNION ALL`, in the same order): as one compound statement SQLite runs the first part as a
 * co-routine, which costs more than both statements apart.
 */
export const selectCandidates = (store: Store) => {
  const { sql } = store
  const alone = (now: number, limit: number) =>
    sql`SELECT ${sql.literal(candidateColumns)},
          CAST(NULL AS BIGINT) AS g_served, CAST(NULL AS BIGINT) AS g_weight, CAST(NULL AS BIGINT) AS g_burst
        FROM relay_flow f JOIN relay_event e ON e.flow_id = f.flow_id AND e.seq = f.head_seq
        WHERE f.eligible_at IS NOT NULL AND f.group_id IS NULL AND +f.eligible_at <= ${now} AND f.paused = 0
        ORDER BY f.served, f.flow_id LIMIT ${walkLimit(store, now, limit)}`
  const grouped = (now: number, limit: number, perGroup: number) =>
    sql`SELECT ${sql.literal(candidateColumns)}, g.served AS g_served, g.weight AS g_weight, g.burst AS g_burst
      FROM (SELECT group_id, served, weight, burst FROM relay_group
          WHERE eligible_at IS NOT NULL AND +eligible_at <= ${now} AND paused = 0 ORDER BY served, group_id LIMIT ${walkLimit(store, now, limit)}) AS g
        JOIN relay_flow f ON f.flow_id IN (SELECT flow_id FROM relay_flow
          WHERE group_id = g.group_id AND eligible_at IS NOT NULL AND group_id IS NOT NULL AND +eligible_at <= ${now} AND paused = 0
          ORDER BY served, flow_id ${limitTo(sql, perGroup)})
        JOIN relay_event e ON e.flow_id = f.flow_id AND e.seq = f.head_seq`
  // SQLite sets up the grouped part's subqueries even when it finds no group (on a store with
  // none, more than the rest of a claim's reads): it runs only when some group has an
  // eligible head or waits for one (the first entry of the turn index, if any).
  const anyGroup = sql<{ readonly any: number }>`SELECT EXISTS (SELECT 1 FROM relay_group WHERE eligible_at IS NOT NULL) AS any`
  return byGroupsFirst((now, limit, perGroup) =>
    query(store, alone(now, limit), (first) =>
      query(store, anyGroup, ([groups]) =>
        groups?.any !== 1
          ? Rows.records.candidates(first)
          : query(store, grouped(now, limit, perGroup), (second) => Rows.records.candidates(second.length === 0 ? first : [...first, ...second])))))
}

/** A flow that is neither paused nor in a paused group (rows of `relay_flow` unaliased). */
export const unpaused = (sql: Store["sql"]) =>
  sql.literal("paused = 0 AND (group_id IS NULL OR group_id NOT IN (SELECT group_id FROM relay_group WHERE paused <> 0))")

/**
 * The least `eligible_at` meeting `bound` of the flows a claim may take (`unpaused`): while
 * nothing is paused (two empty partial indexes say so), the first entry of the wake index, as
 * without pauses; else the first of it that is not paused, past the paused ones.
 */
export const unpausedMin = (sql: Store["sql"], bound: Fragment) =>
  sql`CASE WHEN EXISTS (SELECT 1 FROM relay_flow WHERE paused <> 0) OR EXISTS (SELECT 1 FROM relay_group WHERE paused <> 0)
    THEN (SELECT MIN(eligible_at) FROM relay_flow WHERE ${bound} AND ${unpaused(sql)})
    ELSE (SELECT MIN(eligible_at) FROM relay_flow WHERE ${bound}) END`
