/**
 * Our drain loops: claim → in-process receiver (the Counter business in its own SQLite file) →
 * settle, at the fixed logical tick 0. `Relay.step` (3 commits per event: claim, receive,
 * settle), `Relay.stepBatch(n)` (1 claim + 1 receive (`Inbox.receiveBatch`) + 1 settle commit per
 * n events), and the worker daemon `relay.run(...)`. The rows that use them are in `throughput.ts`.
 */
import Database from "better-sqlite3"
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Layer, Logger, LogLevel, Ref } from "effect"
// The SQLite entry: the RSS child measures a drain that loads it alone, or with the main entry too.
import { Counter, Inbox, Relay, RelayQueue, SqliteInbox, SqliteRelayQueue, Transport } from "../src/sqlite.js"
import type { DeliveryInput, DeliveryReply, PolicyInput, RelayQueueService, RunOptions, TransportService } from "../src/sqlite.js"
import type { Synchronous } from "./floor.js"

/** Options of the stores a drain opens: durability, and the policy the store was created with. */
export interface StoreOptions {
  readonly synchronous?: Synchronous | undefined
  readonly policy?: PolicyInput | undefined
}

/**
 * The layers' options for a durability. `synchronous` goes in only when it is not the default, and
 * through a variable, so this compiles whether or not the library has the option yet; callers check
 * the effect with `readSynchronous`.
 */
export const sqliteOptions = (filename: string, options: StoreOptions = {}) => {
  const base: { filename: string; policy?: PolicyInput } = options.policy === undefined ? { filename } : { filename, policy: options.policy }
  return options.synchronous === undefined || options.synchronous === "full" ? base : { ...base, synchronous: options.synchronous }
}

/**
 * What the receiver saw (accepted deliveries, deliveries out of per-flow order: must stay 0) and
 * how many settles came back `Acked`; `onAck` runs after each counted ack.
 */
export interface Delivered {
  accepted: number
  orderViolations: number
  acked: number
  /** The queue's write transactions the worker ran (claims, settles, settle-and-claims), each one commit. */
  queueWrites: number
  /** The receiver's calls (`deliver`, `deliverBatch`), each one receiver transaction. */
  receiverCalls: number
  onAck: () => void
  readonly last: Map<string, number>
}

/** A fresh `Delivered`. */
export const delivered = (): Delivered => ({
  accepted: 0,
  orderViolations: 0,
  acked: 0,
  queueWrites: 0,
  receiverCalls: 0,
  onAck: () => {},
  last: new Map()
})

/** The queue as the worker sees it, counting `Acked` outcomes of `settle` and `settleBatch` (however the worker groups them). */
const countingQueue = (seen: Delivered) =>
  Layer.effect(
    RelayQueue,
    Effect.map(RelayQueue, (queue): RelayQueueService => {
      const count = (outcomes: ReadonlyArray<{ readonly _tag: string }>) => {
        for (const outcome of outcomes) {
          if (outcome._tag === "Acked") {
            seen.acked++
            seen.onAck()
          }
        }
      }
      const written = Effect.sync(() => seen.queueWrites++)
      return {
        ...queue,
        claim: Effect.zipLeft(queue.claim, written),
        claimBatch: (limit) => Effect.zipLeft(queue.claimBatch(limit), written),
        claimUpTo: (limit) => Effect.zipLeft(queue.claimUpTo(limit), written),
        settle: (token, reply) => Effect.tap(queue.settle(token, reply), (outcome) => count([outcome])).pipe(Effect.zipLeft(written)),
        settleBatch: (items) => Effect.tap(queue.settleBatch(items), count).pipe(Effect.zipLeft(written)),
        settleAndClaim: (items, limit) =>
          Effect.tap(queue.settleAndClaim(items, limit), ({ outcomes }) => count(outcomes)).pipe(Effect.zipLeft(written))
      }
    })
  )

const record = (seen: Delivered, delivery: DeliveryInput, reply: DeliveryReply) => {
  if (reply._tag !== "Accepted") return
  seen.accepted++
  if (delivery.seq !== (seen.last.get(delivery.flowId) ?? 0) + 1) seen.orderViolations++
  seen.last.set(delivery.flowId, delivery.seq)
}

/** The in-process transport to the inbox, counting accepted deliveries and checking their order. */
const countingTransport = (seen: Delivered) =>
  Layer.effect(
    Transport,
    Effect.map(Transport, (inner): TransportService => ({
      deliver: (delivery) =>
        Effect.tap(inner.deliver(delivery), (reply) => {
          seen.receiverCalls++
          record(seen, delivery, reply)
        }),
      deliverBatch: inner.deliverBatch === undefined ? undefined : (deliveries) =>
        Effect.tap(inner.deliverBatch!(deliveries), (replies) => {
          seen.receiverCalls++
          replies.forEach((reply, i) => record(seen, deliveries[i]!, reply))
        })
    }))
  ).pipe(Layer.provide(Transport.layerInbox))

/** The worker over a queue file and an inbox file running the Counter business. */
export const relayLayer = (queueFile: string, inboxFile: string, options: StoreOptions = {}, seen: Delivered = delivered()) => {
  const receiver = Layer.unwrapEffect(
    Effect.map(Ref.make(1000), (maxDelta) =>
      SqliteInbox.layer({ ...sqliteOptions(inboxFile, { synchronous: options.synchronous }), business: Counter.business(maxDelta) }))
  )
  return Relay.layer.pipe(
    Layer.provide(countingTransport(seen)),
    Layer.provide(countingQueue(seen)),
    Layer.provideMerge(receiver),
    Layer.provideMerge(SqliteRelayQueue.layer(sqliteOptions(queueFile, options))),
    Layer.orDie
  )
}

/**
 * The worker over a queue file and an in-memory handler that does what the peers' handlers do:
 * accept, and check each flow's order (the last seq per flow), storing nothing.
 */
export const queueOnlyLayer = (queueFile: string, options: StoreOptions = {}, seen: Delivered = delivered()) => {
  const accept: DeliveryReply = { _tag: "Accepted" }
  const transport = Layer.succeed(Transport, {
    deliver: (delivery) =>
      Effect.sync(() => {
        record(seen, delivery, accept)
        return accept
      })
  })
  return Relay.layer.pipe(
    Layer.provide(transport),
    Layer.provide(countingQueue(seen)),
    Layer.provideMerge(SqliteRelayQueue.layer(sqliteOptions(queueFile, options))),
    Layer.orDie
  )
}

/**
 * `PRAGMA synchronous` of the inbox connection the library opened with these options ("FULL",
 * "NORMAL", …): whether the library honoured the option. (The queue has no read hook; its layer
 * takes the same store options.)
 */
export const readSynchronous = (inboxFile: string, synchronous: Synchronous) =>
  Effect.gen(function*() {
    const inbox = yield* SqliteInbox.make({ ...sqliteOptions(inboxFile, { synchronous }), business: Counter.business(yield* Ref.make(1000)) })
    const code = yield* inbox.read((sql) => Effect.map(sql<{ synchronous: number }>`PRAGMA synchronous`, (rows) => Number(rows[0]?.synchronous)))
    return ({ 0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA" } as Record<number, string>)[code] ?? String(code)
  }).pipe(Effect.scoped, Effect.orDie)

/** Wall and CPU time spent beside the drain (a ceiling burst, say), left out of its figures. */
export interface Aside {
  readonly wallMs: number
  readonly cpuUs: number
}

/**
 * Runs after each step (or ack) with the events drained and the seconds elapsed so far; answers
 * the time it spent beside the drain, if it did anything. (Measuring every call would charge the
 * drain two `process.cpuUsage` calls per step, some 35 µs here, that the floor does not pay.)
 */
export type Progress = (drained: number, seconds: number) => Aside | void

/** Runs `f` and answers the wall and CPU time it took. */
export const aside = (f: () => void): Aside => {
  const started = performance.now()
  const cpu = process.cpuUsage()
  f()
  const used = process.cpuUsage(cpu)
  return { wallMs: performance.now() - started, cpuUs: used.user + used.system }
}

export interface LoopResult {
  readonly drained: number
  readonly complete: boolean
  readonly seconds: number
  readonly queueCommits: number
  readonly inboxCommits: number
  /** CPU time of this process during the loop (user + system), seconds. */
  readonly cpuSeconds: number
}

/**
 * Steps until the queue is dry or `maxSeconds` of stepping pass; `onProgress` runs after each
 * step, and the time it says it spent is left out of the figures. Every reply must be
 * `Accepted` and every outcome `Acked`.
 */
export const drainLoop = (
  batchSize: number,
  maxSeconds: number,
  receiverStores: boolean,
  onProgress: Progress = () => {}
) =>
  Effect.gen(function*() {
    const relay = yield* Relay
    let drained = 0
    let queueCommits = 0
    let inboxCommits = 0
    let complete = false
    let asideMs = 0
    let asideCpu = 0
    const cpu = process.cpuUsage()
    const started = performance.now()
    const elapsedMs = () => performance.now() - started - asideMs
    while (elapsedMs() < maxSeconds * 1000) {
      if (batchSize === 1) {
        const result = yield* relay.step
        queueCommits += 1
        if (result._tag === "Idle") {
          complete = true
          break
        }
        if (result.outcome._tag !== "Acked") return yield* Effect.dieMessage(`unexpected ${result.outcome._tag}`)
        queueCommits += 1
        inboxCommits += 1
        drained += 1
      } else {
        const result = yield* relay.stepBatch(batchSize)
        queueCommits += 1
        if (result.failed.length > 0) return yield* Effect.dieMessage(`delivery failed: ${result.failed[0]!.error.message}`)
        if (result.delivered.length === 0) {
          complete = true
          break
        }
        if (result.delivered.some((d) => d.outcome._tag !== "Acked")) return yield* Effect.dieMessage("unexpected outcome")
        queueCommits += 1
        // The in-process transport hands a batch to `Inbox.receiveBatch`: one receiver commit.
        inboxCommits += 1
        drained += result.delivered.length
      }
      const spent = onProgress(drained, elapsedMs() / 1000)
      if (spent) {
        asideMs += spent.wallMs
        asideCpu += spent.cpuUs
      }
    }
    const seconds = elapsedMs() / 1000
    const used = process.cpuUsage(cpu)
    const cpuSeconds = (used.user + used.system - asideCpu) / 1e6
    return { drained, complete, seconds, queueCommits, inboxCommits: receiverStores ? inboxCommits : 0, cpuSeconds } satisfies LoopResult
  }).pipe(Effect.orDie)

export const inboxCheck = Effect.flatMap(Inbox, (inbox) =>
  inbox.read((sql) =>
    Effect.map(
      sql<{ n: number; total: number | null }>`SELECT (SELECT COUNT(*) FROM inbox_receipt) AS n,
        (SELECT SUM(total) FROM counter_total) AS total`,
      (rows) => ({ receipts: Number(rows[0]!.n), total: Number(rows[0]!.total ?? 0) })
    ))).pipe(Effect.orDie)

/** Acked events in a queue file (read-only connection). */
export const countAcked = (queueFile: string): number => {
  const db = new Database(queueFile, { readonly: true })
  try {
    return Number((db.prepare("SELECT COUNT(*) AS n FROM relay_event WHERE state = 'acked'").get() as { n: number }).n)
  } finally {
    db.close()
  }
}

/**
 * The worker daemon, `relay.run(options)`, until `events` settles came back `Acked` (or
 * `maxSeconds` pass), then interrupted. Time and CPU run from the fork to the last ack. The end is
 * signalled by the ack itself, not polled: with busy workers, a timer-driven poll is served late.
 */
export const daemonLoop = (
  events: number,
  maxSeconds: number,
  seen: Delivered,
  options: RunOptions,
  onProgress: Progress = () => {}
) =>
  Effect.gen(function*() {
    const relay = yield* Relay
    const done = yield* Deferred.make<void>()
    let asideMs = 0
    let asideCpu = 0
    const cpu = process.cpuUsage()
    const started = performance.now()
    const elapsedMs = () => performance.now() - started - asideMs
    // The time cap is checked here too: the sleep below is a timer, and busy workers delay timers.
    // `onProgress` runs after each counted ack; the time it says it spent is left out of the figures.
    seen.onAck = () => {
      if (seen.acked >= events || elapsedMs() >= maxSeconds * 1000) Deferred.unsafeDone(done, Exit.void)
      const spent = onProgress(seen.acked, elapsedMs() / 1000)
      if (spent) {
        asideMs += spent.wallMs
        asideCpu += spent.cpuUs
      }
    }
    const writes = seen.queueWrites
    const calls = seen.receiverCalls
    const fiber = yield* Effect.fork(relay.run({ metricsInterval: null, ...options }))
    yield* Effect.raceAll([
      Deferred.await(done),
      Effect.sleep(Duration.seconds(maxSeconds)),
      // A daemon that stopped by itself (a bad option, say) must not be waited for until maxSeconds.
      Effect.flatMap(Fiber.await(fiber), (exit) =>
        Effect.dieMessage(`relay.run stopped: ${Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "?"}`))
    ])
    const seconds = elapsedMs() / 1000
    const used = process.cpuUsage(cpu)
    const drained = seen.acked
    const queueCommits = seen.queueWrites - writes
    const inboxCommits = seen.receiverCalls - calls
    yield* Fiber.interrupt(fiber)
    return {
      drained,
      complete: drained >= events,
      seconds,
      queueCommits,
      inboxCommits,
      cpuSeconds: (used.user + used.system - asideCpu) / 1e6
    } satisfies LoopResult
  }).pipe(Logger.withMinimumLogLevel(LogLevel.Warning))
