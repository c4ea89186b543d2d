/**
 * A worker process of `npm run bench -- --pg` (see bench/pg/protocol.ts for the commands). It is
 * reused for every run: fair-relay, pg-boss and graphile-worker are all loaded once at start-up,
 * so the measured time never includes a process or module start.
 */
import { Cause, Duration, Effect, Exit, Fiber, Logger, LogLevel, Scope } from "effect"
import type { RuntimeFiber } from "effect/Fiber"
import { Logger as GraphileLogger, run as graphileRun } from "graphile-worker"
import type { Runner } from "graphile-worker"
import pg from "pg"
import { PgBoss } from "pg-boss"
// The modules themselves rather than src/index.ts: a child loads less (faster start-up).
import type { DeliveryReply } from "../../src/domain/Outcomes.js"
import * as PgRelayQueue from "../../src/layers/PgRelayQueue.js"
import * as Relay from "../../src/services/Relay.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import type { RelayQueueService } from "../../src/services/RelayQueue.js"
import { Transport } from "../../src/services/Transport.js"
import type { TransportService } from "../../src/services/Transport.js"
import { commands, emit, runMain } from "../../scenarios/processes/io.js"
import { floorWorker, installStep } from "./floor.js"
import { GraphileTask, PgBossQueue } from "./protocol.js"
import type { ChildStats, RunSpec } from "./protocol.js"
import { claimsOf, libraryOf } from "./stores.js"

/**
 * Every statement of all three libraries goes through node-postgres's `Client.prototype.query`
 * (one `pg` module is installed; @effect/sql-pg, pg-boss and graphile-worker all use it): counted
 * here as round trips to the server.
 */
let queries = 0
const query = pg.Client.prototype.query
pg.Client.prototype.query = function(this: pg.Client, ...args: Array<unknown>) {
  queries++
  return (query as (...args: Array<unknown>) => unknown).apply(this, args)
} as unknown as typeof query

/** Counters one run's driver updates. */
class Counters {
  handled = 0
  firstAt: number | null = null
  lastAt: number | null = null
  empty = 0
  errors = 0
  firstError: string | null = null
  handle(n = 1) {
    const now = Date.now()
    if (this.firstAt === null) this.firstAt = now
    this.lastAt = now
    this.handled += n
  }
  error(error: unknown) {
    this.errors++
    if (this.firstError === null) this.firstError = error instanceof Error ? error.message : String(error)
  }
}

/** A library running in this process: prepared (connected), then started, then stopped. */
interface Driver {
  readonly start: () => void
  readonly stop: () => Promise<void>
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** A job's handler after it was counted: nothing, or `spec.handlerMs` of waiting (`RunSpec.handlerMs`). */
const handler = (spec: RunSpec): Promise<void> => spec.handlerMs === 0 ? Promise.resolve() : sleep(spec.handlerMs)

/**
 * A driver that runs each of `works` in a loop of its own until stopped: a work answers whether it
 * found a job (none: sleep `idleMs`); a failure is counted, and the loop goes on after 20 ms.
 * `close` ends the library.
 */
const looping = (
  counters: Counters,
  idleMs: number,
  works: ReadonlyArray<() => Promise<boolean>>,
  close: () => Promise<void>
): Driver => {
  let stopping = false
  let loops: Promise<unknown> = Promise.resolve()
  const loop = async (work: () => Promise<boolean>) => {
    while (!stopping) {
      try {
        if (!(await work())) {
          counters.empty++
          await sleep(idleMs)
        }
      } catch (error) {
        counters.error(error)
        await sleep(20)
      }
    }
  }
  return {
    start: () => {
      loops = Promise.all(works.map(loop))
    },
    stop: async () => {
      stopping = true
      await loops
      await close()
    }
  }
}

const accepted: DeliveryReply = { _tag: "Accepted" }

/**
 * fair-relay: a `PgRelayQueue` (its own pool) and `Relay.run` with `concurrency` workers (one for
 * the batched kinds) and a transport whose `deliver` answers `Accepted` (after `handlerMs`, without
 * I/O). The queue is wrapped only to count empty claims and failed transactions.
 */
const fairRelay = async (spec: RunSpec, counters: Counters): Promise<Driver> => {
  const url = new URL(spec.url)
  url.searchParams.set("options", `-c search_path=${spec.schema}`)
  const scope = Effect.runSync(Scope.make())
  const queue = await Effect.runPromise(
    Scope.extend(
      PgRelayQueue.make({
        url: url.toString(),
        maxConnections: spec.maxConnections,
        policy: { leaseTicks: "60 seconds" },
        claims: claimsOf(libraryOf(spec.kind))
      }),
      scope
    )
  )
  const counted = <A, E>(effect: Effect.Effect<A, E>, isEmpty: (a: A) => boolean) =>
    effect.pipe(
      Effect.tap((a) => Effect.sync(() => isEmpty(a) && counters.empty++)),
      Effect.tapErrorCause((cause) => Effect.sync(() => Cause.isInterruptedOnly(cause) || counters.error(Cause.pretty(cause))))
    )
  const wrapped: RelayQueueService = {
    ...queue,
    claim: counted(queue.claim, (outcome) => outcome._tag === "Idle"),
    claimBatch: (limit) => counted(queue.claimBatch(limit), (claims) => claims.length === 0),
    settle: (token, reply) => counted(queue.settle(token, reply), () => false),
    settleBatch: (items) => counted(queue.settleBatch(items), () => false),
    settleAndClaim: (items, limit) => counted(queue.settleAndClaim(items, limit), ({ claims }) => limit > 0 && claims.length === 0)
  }
  const handled = Effect.sync(() => {
    counters.handle()
    return accepted
  })
  const transport: TransportService = {
    deliver: () => spec.handlerMs === 0 ? handled : Effect.zipLeft(handled, Effect.sleep(Duration.millis(spec.handlerMs)))
  }
  const relay = await Effect.runPromise(
    Relay.make.pipe(Effect.provideService(RelayQueue, wrapped), Effect.provideService(Transport, transport))
  )
  let fiber: RuntimeFiber<never, Relay.RelayConfigError> | undefined
  return {
    start: () => {
      fiber = Effect.runFork(
        relay.run({
          workers: spec.batchSize === 1 ? spec.concurrency : 1,
          batchSize: spec.batchSize,
          pollInterval: Duration.millis(spec.idleMs),
          deliveryTimeout: Duration.seconds(10),
          shutdownGrace: Duration.seconds(5),
          metricsInterval: null
        }).pipe(Logger.withMinimumLogLevel(LogLevel.Error))
      )
    },
    stop: async () => {
      if (fiber !== undefined) {
        const exit = await Effect.runPromise(Fiber.interrupt(fiber))
        if (Exit.isFailure(exit) && !Exit.isInterrupted(exit)) counters.error(Cause.pretty(exit.cause))
      }
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }
}

/**
 * pg-boss: one queue with the `key_strict_fifo` policy, every job with `singletonKey` = its flow;
 * `concurrency` loops of `fetch(batchSize)` → handler → `complete` of the fetched jobs (as
 * `{ id, retryCount }`, the attempt-fenced settle its own `work()` uses). (Its `work()` loop waits
 * out its polling interval, at least 500 ms, after every fetch that does not fill a batch; see
 * bench/README.md, "How the peers are driven".)
 */
const pgBoss = async (spec: RunSpec, counters: Counters): Promise<Driver> => {
  const boss = new PgBoss({
    connectionString: spec.url,
    schema: spec.schema,
    max: spec.maxConnections,
    application_name: "fair-relay-bench",
    migrate: false,
    supervise: false,
    schedule: false,
    // No instance-registry row and heartbeat: background writes off the job path, like supervise.
    registerInstance: false
  })
  boss.on("error", (error) => counters.error(error))
  await boss.start()
  const fetchLoop = async () => {
    // `fetch` answers an empty list when its statement fails on a unique index (SQLSTATE
    // 23505: a concurrent fetch took the same key's slot) and throws on any other error.
    const jobs = await boss.fetch(PgBossQueue, { batchSize: spec.batchSize })
    if (jobs.length === 0) return false
    counters.handle(jobs.length)
    await handler(spec)
    await boss.complete(PgBossQueue, jobs)
    return true
  }
  return looping(counters, spec.idleMs, Array.from({ length: spec.concurrency }, () => fetchLoop), () => boss.stop({ graceful: false, close: true }))
}

/**
 * graphile-worker: `run()` with `concurrency` jobs at a time per process, jobs in the named queue
 * of their flow (run serially), no local queue and no batched completion: one job per fetch and one
 * completion per job, like pg-boss's `fetch` with `batchSize: 1`.
 */
const graphileWorker = async (spec: RunSpec, counters: Counters): Promise<Driver> => {
  const logger = new GraphileLogger(() => (level, message) => {
    if (level === "error") counters.error(message)
  })
  // Our own pool, so that it is closed (and its errors handled) before the parent drops the database.
  const pool = new pg.Pool({ connectionString: spec.url, max: spec.maxConnections, application_name: "fair-relay-bench" })
  pool.on("error", (error) => counters.error(error))
  let runner: Runner | undefined
  let starting: Promise<void> = Promise.resolve()
  return {
    start: () => {
      starting = graphileRun({
        pgPool: pool,
        schema: spec.schema,
        concurrency: spec.concurrency,
        pollInterval: spec.idleMs,
        noHandleSignals: true,
        logger,
        taskList: {
          [GraphileTask]: async () => {
            counters.handle()
            await handler(spec)
          }
        }
      }).then(
        (started) => {
          runner = started
        },
        (error: unknown) => counters.error(error)
      )
    },
    stop: async () => {
      await starting
      if (runner !== undefined) await runner.stop()
      await pool.end()
    }
  }
}

/**
 * The floor (bench/pg/floor.ts): the daemon's single step through a raw `pg` client, in 5 round
 * trips or in 2 (pipelined, the walk with the held event, as ours), over a store with exact claims made by the library; with
 * `concurrency` above 1, that many loops, each on a client of its own (no group commit), at most
 * `maxConnections`.
 */
const floor = (rounds: 1 | 2 | 5) => async (spec: RunSpec, counters: Counters): Promise<Driver> => {
  const url = new URL(spec.url)
  url.searchParams.set("options", `-c search_path=${spec.schema}`)
  const clients = await Promise.all(Array.from({ length: Math.min(spec.concurrency, spec.maxConnections) }, async () => {
    // `pipeline` (node-postgres ≥ 8.2x) sends a query without waiting for the answers before it.
    const client = new pg.Client({ connectionString: url.toString(), application_name: "fair-relay-bench", pipeline: true } as pg.ClientConfig)
    client.on("error", (error) => counters.error(error))
    await client.connect()
    return client
  }))
  if (rounds === 1) await installStep(clients[0]!)
  const works = clients.map((client) => {
    const worker = floorWorker(client, { rounds, leaseMs: 60_000 })
    return async () => {
      if ((await worker.step()) === undefined) return false
      counters.handle()
      await handler(spec)
      return true
    }
  })
  return looping(counters, spec.idleMs, works, () => Promise.all(clients.map((client) => client.end())).then(() => undefined))
}

const drivers = {
  "fair-relay-single": fairRelay,
  "fair-relay-batch": fairRelay,
  "fair-relay-parallel-single": fairRelay,
  "fair-relay-parallel-batch": fairRelay,
  "floor-single": floor(5),
  "floor-pipelined-single": floor(2),
  "floor-function-single": floor(1),
  "pg-boss": pgBoss,
  "graphile-worker": graphileWorker
} as const

const main = async () => {
  const input = commands()
  emit({ type: "hello", pid: process.pid })
  for (;;) {
    const command = await input.next()
    if (command === undefined || command.cmd === "exit") return
    if (command.cmd !== "prepare") throw new Error(`expected prepare, got ${JSON.stringify(command)}`)
    const spec = command.run as RunSpec
    const counters = new Counters()
    let driver: Driver
    try {
      driver = await drivers[spec.kind](spec, counters)
    } catch (error) {
      emit({ type: "error", pid: process.pid, message: error instanceof Error ? error.stack ?? error.message : String(error) })
      continue
    }
    emit({ type: "ready", pid: process.pid })
    const go = await input.next()
    if (go?.cmd !== "go") throw new Error(`expected go, got ${JSON.stringify(go)}`)
    const cpu = process.cpuUsage()
    const queriesBefore = queries
    driver.start()
    const stop = await input.next()
    if (stop?.cmd !== "stop") throw new Error(`expected stop, got ${JSON.stringify(stop)}`)
    await driver.stop().catch((error: unknown) => counters.error(error))
    const used = process.cpuUsage(cpu)
    const stats: ChildStats = {
      pid: process.pid,
      handled: counters.handled,
      queries: queries - queriesBefore,
      firstAt: counters.firstAt,
      lastAt: counters.lastAt,
      empty: counters.empty,
      errors: counters.errors,
      firstError: counters.firstError,
      cpuUserMs: Math.round(used.user / 1000),
      cpuSystemMs: Math.round(used.system / 1000)
    }
    emit({ type: "stopped", ...stats })
  }
}

runMain(main)
