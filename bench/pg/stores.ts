/**
 * The parent's side of each run: create the run's schema with `flows × perFlow` jobs through each
 * library's own batch insert, count what has been completed, and check the end state.
 *
 * Every library gets the same jobs in the same order: job i belongs to flow `i mod flows` and is
 * that flow's `⌊i / flows⌋`-th job, so the global enqueue order is round robin over the flows (the
 * best case for the FIFO libraries; see bench/README.md, "How the peers are driven").
 */
import { Effect } from "effect"
import { Logger as GraphileLogger, makeWorkerUtils } from "graphile-worker"
import pg from "pg"
import { PgBoss } from "pg-boss"
import * as PgRelayQueue from "../../src/layers/PgRelayQueue.js"
import type { Kind } from "./protocol.js"
import { GraphileTask, PgBossQueue } from "./protocol.js"

/** How many jobs, over how many flows. */
export interface Workload {
  readonly flows: number
  readonly perFlow: number
}

/** The library a kind belongs to. */
export type Library = "fair-relay" | "fair-relay-parallel" | "pg-boss" | "graphile-worker"

export const libraryOf = (kind: Kind): Library =>
  kind === "fair-relay-single" || kind === "fair-relay-batch" || kind === "floor-single" || kind === "floor-pipelined-single" ||
    kind === "floor-function-single"
    ? "fair-relay"
    : kind === "fair-relay-parallel-single" || kind === "fair-relay-parallel-batch"
    ? "fair-relay-parallel"
    : kind

/** The code a kind runs in its worker processes: fair-relay (either claim mode), the floor (raw `pg`), or a peer. */
export const codeOf = (kind: Kind): string =>
  kind === "floor-single" || kind === "floor-pipelined-single" || kind === "floor-function-single" ? "floor" : libraryOf(kind) === "fair-relay-parallel" ? "fair-relay" : libraryOf(kind)

/** Whether a kind claims in batches (the others take one job per transaction). */
export const isBatched = (kind: Kind): boolean => kind === "fair-relay-batch" || kind === "fair-relay-parallel-batch"

/** The claim mode of a fair-relay library's store. */
export const claimsOf = (library: Library) => (library === "fair-relay-parallel" ? "parallel" : "exact")

const flowId = (flow: number) => `F${String(flow).padStart(4, "0")}`

/** The i-th job of the workload. */
const job = (workload: Workload, i: number) => ({ flow: flowId(i % workload.flows), seq: Math.floor(i / workload.flows) + 1 })

const chunks = function*(total: number, size: number) {
  for (let start = 0; start < total; start += size) yield Array.from({ length: Math.min(size, total - start) }, (_, k) => start + k)
}

/** A URL whose connections use `schema` as their search path. */
export const withSchema = (url: string, schema: string): string => {
  const u = new URL(url)
  u.searchParams.set("options", `-c search_path=${schema}`)
  return u.toString()
}

/** A pool of one connection to the bench database, for setup, counting and checks. */
export const adminPool = (url: string) => new pg.Pool({ connectionString: url, max: 1, application_name: "fair-relay-bench-parent" })

const silentGraphileLogger = new GraphileLogger(() => () => {})

/** Creates the run's store in `schema` (a fresh schema) and enqueues the workload. */
export const createStore = async (library: Library, url: string, schema: string, workload: Workload): Promise<void> => {
  const total = workload.flows * workload.perFlow
  switch (library) {
    case "fair-relay":
    case "fair-relay-parallel": {
      // `enqueueBatch`, 5,000 events per transaction; migrations run when the store opens.
      await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function*() {
            const queue = yield* PgRelayQueue.make({ url: withSchema(url, schema), maxConnections: 1, claims: claimsOf(library) })
            for (const indexes of chunks(total, 5_000)) {
              yield* queue.enqueueBatch(indexes.map((i) => {
                const { flow, seq } = job(workload, i)
                return { eventId: `${flow}-${seq}`, flowId: flow, body: { seq } }
              }))
            }
          })
        )
      )
      return
    }
    case "pg-boss": {
      // A `key_strict_fifo` queue (every job needs a singletonKey: the flow) filled through
      // `insert` (one INSERT … SELECT FROM json_to_recordset per call), 2,000 jobs per call. The
      // ids are given so that (created_on, id), the order in which key_strict_fifo picks each
      // key's head, is the enqueue order (one insert shares one created_on).
      const boss = new PgBoss({ connectionString: url, schema, max: 1, supervise: false, schedule: false, registerInstance: false })
      boss.on("error", () => {})
      await boss.start()
      try {
        await boss.createQueue(PgBossQueue, { policy: "key_strict_fifo" })
        for (const indexes of chunks(total, 2_000)) {
          await boss.insert(
            PgBossQueue,
            indexes.map((i) => {
              const { flow, seq } = job(workload, i)
              return { id: `00000000-0000-4000-8000-${i.toString(16).padStart(12, "0")}`, data: { flow, seq }, singletonKey: flow }
            })
          )
        }
      } finally {
        await boss.stop({ graceful: false, close: true })
      }
      return
    }
    case "graphile-worker": {
      // `addJobs` (one call of graphile_worker.add_jobs), 2,000 jobs per call; `runAt` in the past,
      // 1 ms apart in enqueue order, so that (priority, run_at), its fetch order, is the enqueue order.
      const utils = await makeWorkerUtils({ connectionString: url, schema, maxPoolSize: 1, logger: silentGraphileLogger })
      try {
        await utils.migrate()
        const base = Date.now() - 24 * 3600 * 1000
        for (const indexes of chunks(total, 2_000)) {
          await utils.addJobs(indexes.map((i) => {
            const { flow, seq } = job(workload, i)
            return { identifier: GraphileTask, payload: { flow, seq }, queueName: flow, runAt: new Date(base + i) }
          }))
        }
      } finally {
        await utils.release()
      }
      return
    }
  }
}

/** How many jobs of the run have been completed (committed as done). */
export const countDone = async (pool: pg.Pool, library: Library, schema: string, total: number): Promise<number> => {
  const q = (text: string) => pool.query<{ n: number }>(text).then((r) => r.rows[0]!.n)
  switch (library) {
    case "fair-relay":
    case "fair-relay-parallel":
      return q(`SELECT count(*)::int AS n FROM "${schema}".relay_event WHERE state = 'acked'`)
    case "pg-boss":
      return q(`SELECT count(*)::int AS n FROM "${schema}".job WHERE name = '${PgBossQueue}' AND state = 'completed'`)
    case "graphile-worker":
      // Completed jobs are deleted.
      return total - (await q(`SELECT count(*)::int AS n FROM "${schema}"._private_jobs`))
  }
}

/** The end state of a run's store, by state (for the JSON). */
export const endState = async (pool: pg.Pool, library: Library, schema: string): Promise<Record<string, number>> => {
  const rows = async (text: string) =>
    Object.fromEntries((await pool.query<{ k: string; n: number }>(text)).rows.map((r) => [r.k, r.n]))
  switch (library) {
    case "fair-relay":
    case "fair-relay-parallel":
      return rows(`SELECT state AS k, count(*)::int AS n FROM "${schema}".relay_event GROUP BY state`)
    case "pg-boss":
      return rows(`SELECT state::text AS k, count(*)::int AS n FROM "${schema}".job WHERE name = '${PgBossQueue}' GROUP BY state`)
    case "graphile-worker":
      return rows(
        `SELECT CASE WHEN locked_at IS NULL THEN 'waiting' ELSE 'locked' END || CASE WHEN attempts > 0 THEN ',attempted' ELSE '' END AS k, ` +
          `count(*)::int AS n FROM "${schema}"._private_jobs GROUP BY 1`
      )
  }
}
