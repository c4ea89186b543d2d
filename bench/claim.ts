/**
 * Claim latency per backlog, each on a fresh copy of its store:
 *  - our claim: `RelayQueue.claim` through the library, a durable write transaction each,
 *    interleaved across the backlogs;
 *  - our turn query alone (read-only): the two statements the claim reads with (captured from
 *    the library), replayed via better-sqlite3;
 *  - the idle turn query (read-only): the same walk when nothing is eligible, its worst case;
 *  - the article's head query (read-only), via better-sqlite3, against the same file.
 */
import Database from "better-sqlite3"
import { Effect } from "effect"
import { defaultPolicy, SqliteRelayQueue, TickClock } from "../src/index.js"
import type { RelayQueueService } from "../src/index.js"
import { openCeiling } from "./ceiling.js"
import type { Ceiling, CeilingResult } from "./ceiling.js"
import { summarize, timeRuns } from "./stats.js"
import type { Summary } from "./stats.js"
import { cachedStore, removeDb, workCopy } from "./stores.js"
import type { Backlog } from "./stores.js"
import { captureSql, walkParams } from "../scenarios/support/captureSql.js"

/**
 * The statements our claim reads with are captured from the library itself (the `db.query.text`
 * of its SQL spans during a warm-up claim), so the read-only figures replay exactly what
 * `RelayQueue.claim` runs, with its planner hints.
 */
export interface ClaimSql {
  /** The turn query: the flow whose eligible head comes first (params: times and limits, see `walkParams`); it may join the head itself. */
  readonly turn: string
  /** The head lookup (params: flow id, seq), or `null` when the turn query joins the head row. */
  readonly head: string | null
}

const placeholders = (sql: string) => (sql.match(/\?/g) ?? []).length


/** Whether the turn query's parameters are as `walkParams` reads them: at least one time and one limit. */
const readableTurn = (sql: string) => {
  const params = walkParams(sql, 0, 1)
  return params.includes(0) && params.includes(1)
}

const claimSqlOf = (statements: ReadonlyArray<string>): ClaimSql => {
  const turn = statements.find((s) => /FROM relay_flow/.test(s) && /ORDER BY (f\.)?served/.test(s))
  const joined = turn !== undefined && /JOIN relay_event/.test(turn)
  const head = joined ? null : statements.find((s) => /FROM relay_event/.test(s) && /flow_id = \?/.test(s) && /seq = \?/.test(s))
  if (turn === undefined || head === undefined || !readableTurn(turn) || (head !== null && placeholders(head) !== 2)) {
    throw new Error(`the claim's SQL changed shape; update bench/claim.ts:\n${statements.join("\n")}`)
  }
  return { turn, head }
}

/** The article's head query: every flow's lowest non-acked event, the eligible one first in turn. */
export const articleSql = `WITH heads AS (
    SELECT e.* FROM relay_event e
    JOIN (SELECT flow_id, MIN(seq) AS seq FROM relay_event WHERE state != 'acked' GROUP BY flow_id) h
      ON e.flow_id = h.flow_id AND e.seq = h.seq)
  SELECT heads.* FROM heads JOIN relay_flow f ON f.flow_id = heads.flow_id
  WHERE (heads.state = 'ready' AND heads.next_at <= ?) OR (heads.state = 'inflight' AND heads.lease_until <= ?)
  ORDER BY f.served, f.flow_id LIMIT 1`

export interface ClaimSettings {
  /** Claims measured per backlog (after `warmup` unmeasured ones). */
  readonly claims: number
  readonly warmup: number
  /** Time budget of each read-only query's repetitions, ms. */
  readonly queryBudgetMs: number
  /** Raw-commit burst after each round of claims, ms (the ceiling measured alongside). */
  readonly ceilingBurstMs: number
}

export interface ClaimResult extends Backlog {
  readonly store: { readonly cached: boolean; readonly buildSeconds: number; readonly bytes: number }
  /** Durable claims through the library. */
  readonly ourClaim: Summary & { readonly tickAdvances: number; readonly finalTick: number }
  /** The read-only queries below ran at this tick: every lease taken by the claims has expired. */
  readonly queryTick: number
  readonly ourTurnQuery: Summary
  readonly idleTurnQuery: Summary
  readonly articleQuery: Summary
  /** Whether the article's query and our turn query pick the same head at `queryTick`. */
  readonly sameHead: boolean
  readonly plans: { readonly turn: ReadonlyArray<string>; readonly head: ReadonlyArray<string>; readonly article: ReadonlyArray<string> }
}

/** Claim figures of every backlog, and the raw commit ceiling measured between their rounds. */
export interface ClaimsResult {
  readonly backlogs: ReadonlyArray<ClaimResult>
  readonly ceiling: CeilingResult
  /** The claim's read statements, as captured from the library. */
  readonly sql: ClaimSql
}

interface Claimer {
  readonly queue: RelayQueueService
  readonly flows: number
  readonly samples: Array<number>
  tick: number
  inRound: number
  tickAdvances: number
}

/**
 * Our claims on every backlog at once, round by round (one claim per backlog per round, the
 * starting backlog rotating), so that drifting machine load hits every backlog alike. Each
 * backlog claims at a fixed tick; once every flow holds a lease, its tick moves on by one lease
 * so the expired heads are claimable again (the backlog never shrinks: nothing is settled).
 */
const ourClaims = (files: ReadonlyArray<string>, backlogs: ReadonlyArray<Backlog>, settings: ClaimSettings, ceiling: Ceiling) =>
  Effect.gen(function*() {
    const claimers: Array<Claimer> = []
    let captured: ReadonlyArray<string> = []
    for (const [i, file] of files.entries()) {
      const queue = yield* SqliteRelayQueue.make({ filename: file })
      claimers.push({ queue, flows: backlogs[i]!.flows, samples: [], tick: 0, inRound: 0, tickAdvances: 0 })
    }
    for (let round = 0; round < settings.warmup + settings.claims; round++) {
      for (let j = 0; j < claimers.length; j++) {
        const c = claimers[(round + j) % claimers.length]!
        if (c.inRound === c.flows) {
          c.tick += defaultPolicy.leaseTicks
          c.inRound = 0
          c.tickAdvances++
        }
        const claim = TickClock.at(c.tick)(c.queue.claim)
        if (round === 0 && j === 0) {
          const [, statements] = yield* captureSql(claim)
          captured = statements
          c.inRound++
          continue
        }
        const started = performance.now()
        const outcome = yield* claim
        const ms = performance.now() - started
        if (outcome._tag !== "Claimed") return yield* Effect.dieMessage(`claim ${round} at tick ${c.tick} was ${outcome._tag}`)
        c.inRound++
        if (round >= settings.warmup) c.samples.push(ms)
      }
      if (round >= settings.warmup) ceiling.burst(settings.ceilingBurstMs)
    }
    return { claimers, sql: claimSqlOf(captured) }
  }).pipe(Effect.scoped, Effect.orDie)

const plan = (db: Database.Database, sql: string, params: ReadonlyArray<unknown>) =>
  db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params).map((row) => (row as { detail: string }).detail)

interface Row {
  readonly flow_id: string
  readonly head_seq?: number
  readonly seq?: number
}

/** The read-only queries on one store after the claims. */
const readOnly = (file: string, sql: ClaimSql, now: number, budgetMs: number) => {
  const db = new Database(file, { readonly: true })
  try {
    const turn = db.prepare(sql.turn)
    const head = sql.head === null ? null : db.prepare(sql.head)
    const article = db.prepare(articleSql)
    // A turn query that joins the head returns it in the same row (its seq is `head_seq`).
    const ourTurn = () => {
      const row = turn.get(...walkParams(sql.turn, now, 1)) as Row | undefined
      if (row === undefined) return undefined
      return head === null ? { flow_id: row.flow_id, seq: row.head_seq } : (head.get(row.flow_id, row.head_seq) as Row | undefined)
    }
    const theirs = article.get(now, now) as Row | undefined
    const mine = ourTurn()
    return {
      ourTurnQuery: summarize(timeRuns(ourTurn, budgetMs, 100, 20_000)),
      idleTurnQuery: summarize(timeRuns(() => turn.get(...walkParams(sql.turn, -1, 1)), budgetMs, 20, 20_000)),
      articleQuery: summarize(timeRuns(() => article.get(now, now), budgetMs, 3, 1_000)),
      sameHead: theirs !== undefined && mine !== undefined && theirs.flow_id === mine.flow_id && theirs.seq === mine.seq,
      plans: {
        turn: plan(db, sql.turn, walkParams(sql.turn, now, 1)),
        head: sql.head === null ? [] : plan(db, sql.head, ["x", 1]),
        article: plan(db, articleSql, [now, now])
      }
    }
  } finally {
    db.close()
  }
}

/** Measures every backlog, each on a fresh copy of its cached store. */
export const measureClaims = async (
  backlogs: ReadonlyArray<Backlog>,
  settings: ClaimSettings,
  log: (line: string) => void
): Promise<ClaimsResult> => {
  const stores = []
  for (const backlog of backlogs) stores.push(await cachedStore(backlog, log))
  const files = stores.map((store) => workCopy(store, `claims-${store.events}.db`))
  const ceiling = openCeiling("ceiling-claims.db")
  try {
    log(`claiming: ${settings.warmup} + ${settings.claims} rounds over ${backlogs.length} backlogs`)
    const { claimers, sql } = await Effect.runPromise(ourClaims(files, backlogs, settings, ceiling))
    const results = stores.map((store, i): ClaimResult => {
      const c = claimers[i]!
      const queryTick = c.tick + defaultPolicy.leaseTicks
      return {
        events: store.events,
        flows: store.flows,
        store: { cached: store.cached, buildSeconds: store.buildSeconds, bytes: store.bytes },
        ourClaim: { ...summarize(c.samples), tickAdvances: c.tickAdvances, finalTick: c.tick },
        queryTick,
        ...readOnly(files[i]!, sql, queryTick, settings.queryBudgetMs)
      }
    })
    return { backlogs: results, ceiling: ceiling.result(), sql }
  } finally {
    ceiling.close()
    for (const file of files) removeDb(file)
  }
}
