/**
 * End-to-end drain: claim → in-process receiver (the Counter business in its own SQLite file)
 * → settle, every write durable (WAL + synchronous=FULL, the library's defaults), at the fixed
 * logical tick 0. `Relay.step` loops (3 commits per event: claim, receive, settle) against
 * `Relay.stepBatch(n)` loops (1 claim commit + 1 receive commit (`Inbox.receiveBatch`) + 1 settle
 * commit per n events).
 */
import Database from "better-sqlite3"
import { Effect, Layer, Ref } from "effect"
import * as path from "node:path"
import { Counter, Inbox, Relay, SqliteInbox, SqliteRelayQueue, TickClock, Transport } from "../src/index.js"
import type { DeliveryReply } from "../src/index.js"
import { openCeiling } from "./ceiling.js"
import type { CeilingResult } from "./ceiling.js"
import { fill, removeDb, workDir } from "./stores.js"
import type { Backlog } from "./stores.js"

/** `single`: Relay.step; `batch`: Relay.stepBatch(n); `batch-queue-only`: stepBatch(n) with a receiver that stores nothing. */
export type DrainMode = "single" | "batch" | "batch-queue-only"

export interface DrainResult extends Backlog {
  readonly mode: DrainMode
  readonly batchSize: number
  /** Events delivered, accepted and acked. */
  readonly drained: number
  /** Whether the queue ran dry (else the time cap stopped the loop). */
  readonly complete: boolean
  readonly seconds: number
  readonly eventsPerSecond: number
  /** Durable commits issued, by store (the final idle claim included). */
  readonly commits: { readonly queue: number; readonly inbox: number; readonly total: number }
  readonly commitsPerEvent: number
  readonly commitsPerSecond: number
  /** CPU time of the process per drained event, ms (the rest of the wall time is mostly waiting for fsync). */
  readonly cpuMsPerEvent: number
  /** The raw commit ceiling, in bursts taken between this drain's steps (`null` if not interleaved). */
  readonly interleavedCeiling: CeilingResult | null
  /** Read back after the drain: acked events in the queue, receipts and counter total in the inbox. */
  readonly check: { readonly acked: number; readonly receipts: number | null; readonly total: number | null; readonly ok: boolean }
}

/** The worker over a queue file and an inbox file running the Counter business. */
export const relayLayer = (queueFile: string, inboxFile: string) => {
  const receiver = Layer.unwrapEffect(
    Effect.map(Ref.make(1000), (maxDelta) => SqliteInbox.layer({ filename: inboxFile, business: Counter.business(maxDelta) }))
  )
  return Relay.layer.pipe(
    Layer.provide(Transport.layerInbox),
    Layer.provideMerge(receiver),
    Layer.provideMerge(SqliteRelayQueue.layer({ filename: queueFile })),
    Layer.orDie
  )
}

/** The worker over a queue file and a receiver that accepts everything and stores nothing (diagnosis only). */
export const queueOnlyLayer = (queueFile: string) => {
  const accept: DeliveryReply = { _tag: "Accepted" }
  const transport = Layer.succeed(Transport, { deliver: () => Effect.succeed(accept) })
  return Relay.layer.pipe(Layer.provide(transport), Layer.provideMerge(SqliteRelayQueue.layer({ filename: queueFile })), Layer.orDie)
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
 * step, and its own wall and CPU time are left out of the figures. Every reply must be
 * `Accepted` and every outcome `Acked`.
 */
export const drainLoop = (
  batchSize: number,
  maxSeconds: number,
  receiverStores: boolean,
  onProgress: (drained: number, seconds: number) => void = () => {}
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
      const asideStarted = performance.now()
      const asideCpuStarted = process.cpuUsage()
      onProgress(drained, elapsedMs() / 1000)
      const used = process.cpuUsage(asideCpuStarted)
      asideCpu += used.user + used.system
      asideMs += performance.now() - asideStarted
    }
    const seconds = elapsedMs() / 1000
    const used = process.cpuUsage(cpu)
    const cpuSeconds = (used.user + used.system - asideCpu) / 1e6
    return { drained, complete, seconds, queueCommits, inboxCommits: receiverStores ? inboxCommits : 0, cpuSeconds } satisfies LoopResult
  }).pipe(Effect.orDie)

const inboxCheck = Effect.flatMap(Inbox, (inbox) =>
  inbox.read((sql) =>
    Effect.map(
      sql<{ n: number; total: number | null }>`SELECT (SELECT COUNT(*) FROM inbox_receipt) AS n,
        (SELECT SUM(total) FROM counter_total) AS total`,
      (rows) => ({ receipts: Number(rows[0]!.n), total: Number(rows[0]!.total ?? 0) })
    ))).pipe(Effect.orDie)

export const countAcked = (queueFile: string): number => {
  const db = new Database(queueFile, { readonly: true })
  try {
    return Number((db.prepare("SELECT COUNT(*) AS n FROM relay_event WHERE state = 'acked'").get() as { n: number }).n)
  } finally {
    db.close()
  }
}

/** Builds a fresh queue (and inbox) and drains it in `mode`. */
export const measureDrain = async (
  backlog: Backlog,
  mode: DrainMode,
  batchSize: number,
  maxSeconds: number,
  /** Every `everySeconds` of stepping, commit raw for `burstMs` (see `ceiling.ts`). */
  interleave?: { readonly everySeconds: number; readonly burstMs: number }
): Promise<DrainResult> => {
  const queueFile = path.join(workDir, `drain-${mode}.queue.db`)
  const inboxFile = mode === "batch-queue-only" ? undefined : path.join(workDir, `drain-${mode}.inbox.db`)
  removeDb(queueFile)
  if (inboxFile) removeDb(inboxFile)
  const ceiling = interleave === undefined ? undefined : openCeiling(`ceiling-${mode}.db`)
  let nextBurst = 0
  const onProgress = (_: number, seconds: number) => {
    if (ceiling === undefined || interleave === undefined || seconds < nextBurst) return
    ceiling.burst(interleave.burstMs)
    nextBurst = seconds + interleave.everySeconds
  }
  try {
    await Effect.runPromise(fill(queueFile, backlog))
    const size = mode === "single" ? 1 : batchSize
    type Outcome = { readonly loop: LoopResult; readonly inbox: { readonly receipts: number; readonly total: number } | null }
    const { inbox, loop } = await Effect.runPromise<Outcome, never>(
      inboxFile === undefined
        ? drainLoop(size, maxSeconds, false, onProgress).pipe(
          Effect.map((loop) => ({ loop, inbox: null })),
          Effect.provide(queueOnlyLayer(queueFile)),
          TickClock.at(0)
        )
        : Effect.all({ loop: drainLoop(size, maxSeconds, true, onProgress), inbox: inboxCheck }).pipe(
          Effect.provide(relayLayer(queueFile, inboxFile)),
          TickClock.at(0)
        )
    )
    const acked = countAcked(queueFile)
    const commits = { queue: loop.queueCommits, inbox: loop.inboxCommits, total: loop.queueCommits + loop.inboxCommits }
    return {
      ...backlog,
      mode,
      batchSize: size,
      drained: loop.drained,
      complete: loop.complete,
      seconds: loop.seconds,
      eventsPerSecond: loop.drained / loop.seconds,
      commits,
      commitsPerEvent: commits.total / Math.max(1, loop.drained),
      commitsPerSecond: commits.total / loop.seconds,
      cpuMsPerEvent: (loop.cpuSeconds * 1000) / Math.max(1, loop.drained),
      interleavedCeiling: ceiling?.result() ?? null,
      check: {
        acked,
        receipts: inbox?.receipts ?? null,
        total: inbox?.total ?? null,
        ok: acked === loop.drained && (inbox === null || (inbox.receipts === loop.drained && inbox.total === loop.drained))
      }
    }
  } finally {
    ceiling?.close()
    removeDb(queueFile)
    if (inboxFile) removeDb(inboxFile)
  }
}
