/**
 * What the parent (`bench/pg/main.ts`) and its worker processes (`bench/pg/child.ts`) say to each
 * other, one JSON line at a time (`scenarios/processes/spawn.ts` and `io.ts`).
 *
 *   parent → child  {cmd: "prepare", run: RunSpec}   open the store / library, then answer `ready`
 *   parent → child  {cmd: "go"}                      start working (no answer)
 *   parent → child  {cmd: "stop"}                    stop, close everything, answer `stopped`
 *   parent closes stdin                              the child exits
 */

/** The libraries and modes a worker process can run. */
export type Kind =
  /** fair-relay, `Relay.run({ workers: 1, batchSize: 1 })`: claim → deliver → settle. */
  | "fair-relay-single"
  /** fair-relay, `Relay.run({ workers: 1, batchSize })`: claimBatch → deliver each → settleBatch. */
  | "fair-relay-batch"
  /** The same two over a store with parallel claims (`PgRelayQueue` `claims: "parallel"`). */
  | "fair-relay-parallel-single"
  | "fair-relay-parallel-batch"
  /**
   * The floor (bench/pg/floor.ts): the daemon's single step (ack the held head, claim the next, one
   * transaction) through one raw `pg` client, no Effect, on a store with exact claims: one round
   * trip per statement (5), or pipelined in 3 (as many as our store's batches).
   */
  | "floor-single"
  | "floor-pipelined-single"
  /** The same step as one server function (`floor_step`): one call, one round trip. */
  | "floor-function-single"
  /** pg-boss, `fetch(queue, { batchSize: 1 })` → no-op → `complete`, in a loop. */
  | "pg-boss"
  /** graphile-worker, `run({ concurrency: 1, taskList })`, jobs with `queueName` = flow. */
  | "graphile-worker"

/** One measured run as a worker process sees it. */
export interface RunSpec {
  readonly kind: Kind
  /** Connection URL of the bench database (no search path: each library gets `schema`). */
  readonly url: string
  /** The run's own schema. */
  readonly schema: string
  /** Items per fetch/claim transaction (1 except for fair-relay-batch). */
  readonly batchSize: number
  /** How long a worker sleeps when it found nothing to do (all three libraries alike). */
  readonly idleMs: number
  /** Largest connection pool per process. */
  readonly maxConnections: number
  /**
   * How long each job's handler takes (all libraries alike: a timer, no CPU), as a delivery over
   * the network would; 0: a no-op that answers at once.
   */
  readonly handlerMs: number
  /**
   * Jobs in flight per process: fair-relay `Relay.run({ workers })` (single-step kinds; their
   * exchanges share transactions: group commit), graphile-worker `concurrency`, pg-boss that many
   * fetch loops, the floor that many loops on clients of their own. Batched kinds: one worker.
   */
  readonly concurrency: number
}

/** pg-boss's queue name in every run. */
export const PgBossQueue = "bench"

/** graphile-worker's task identifier in every run. */
export const GraphileTask = "noop"

/** What a child reports when it stops. */
export interface ChildStats {
  readonly pid: number
  /** Handler calls (deliveries for fair-relay): work it was handed, not what was committed. */
  readonly handled: number
  /** Date.now() of its first handler call, or null. */
  readonly firstAt: number | null
  /** Date.now() of its last handler call, or null. */
  readonly lastAt: number | null
  /** Statements sent between `go` and the end of `stop` (node-postgres `Client.query` calls). */
  readonly queries: number
  /** Fetches/claims that returned nothing (pg-boss and fair-relay only). */
  readonly empty: number
  /** Failures the library reported (an error event, a failed transaction). */
  readonly errors: number
  readonly firstError: string | null
  /** CPU time of the process between `go` and the end of `stop`. */
  readonly cpuUserMs: number
  readonly cpuSystemMs: number
}
