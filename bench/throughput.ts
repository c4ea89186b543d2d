/**
 * The throughput table: one workload (N events over 64 flows, enqueued one call at a time through
 * `RelayQueue.enqueue`, then drained), measured in one run for
 *  - the floor: our protocol's statements through raw better-sqlite3 (`floor.ts`), single-step
 *    and batched, at `synchronous` FULL and NORMAL;
 *  - ours: `Relay.step`, `Relay.stepBatch(n)`, the daemon `relay.run({ workers: 8, batchSize: 1 })`
 *    and with one worker (single steps that settle and claim in one commit), at FULL and (if the
 *    library has the option) NORMAL, and `Relay.stepBatch(n)` with an in-memory
 *    handler that does what the peers' handlers do (accept, check each flow's order; no inbox);
 *  - with `--peers`: plainjob, liteque and BullMQ on the same workload (`peers.ts`).
 * Every drain runs on a fresh copy of one template store (queue file + inbox file).
 */
import Database from "better-sqlite3"
import { Effect, Ref } from "effect"
import * as fs from "node:fs"
import { Counter, RelayQueue, SqliteInbox, SqliteRelayQueue, TickClock } from "../src/index.js"
import type { PolicyInput } from "../src/index.js"
import { openCeiling } from "./ceiling.js"
import type { CeilingResult } from "./ceiling.js"
import type { Progress } from "./drain.js"
import { aside, countAcked, daemonLoop, delivered, drainLoop, inboxCheck, queueOnlyLayer, readSynchronous, relayLayer, sqliteOptions } from "./drain.js"
import { floorDrain } from "./floor.js"
import type { Synchronous } from "./floor.js"
import { ensurePeersInstalled, runPeer } from "./peers.js"
import type { Peer, PeerFailure, PeerResult } from "./peers.js"
import { checkpoint, eventInput, freshWorkFile, removeDb } from "./stores.js"

/** The policy every store of this table is created and opened with: a production-sized lease, so the daemon's delivery timeout fits. */
export const benchPolicy: PolicyInput = { leaseTicks: 60_000 }
const leaseTicks = 60_000

/** What the table measures. */
export interface ThroughputPlan {
  readonly events: number
  readonly flows: number
  readonly batchSize: number
  readonly daemonWorkers: number
  /** Time cap of each drain. */
  readonly maxSeconds: number
  /** Raw-commit bursts between the steps of our single-step FULL drain (see `ceiling.ts`). */
  readonly interleave: { readonly everySeconds: number; readonly burstMs: number }
  /** Peer runs (`--peers`): workers per run. */
  readonly peerWorkers: ReadonlyArray<number>
}

/** One row of the table. */
export interface Row {
  readonly name: string
  readonly system: "floor" | "fair-relay" | Peer
  readonly mode: "single" | "batch" | "daemon" | "queue-only" | "peer"
  readonly synchronous: Synchronous | null
  readonly durability: string
  readonly order: string
  /** "failed": the run broke or measured the wrong thing (see `note`). */
  readonly status: "ok" | "failed"
  readonly note?: string | undefined
  readonly drained: number
  readonly complete: boolean
  readonly seconds: number
  readonly eventsPerSecond: number
  readonly cpuUsPerEvent: number
  /** Durable commits by file, where the loop can count them. */
  readonly commits: { readonly queue: number; readonly inbox: number } | null
  /** The floor row this one is divided by, and the quotient of events/s and of CPU per event. */
  readonly floor: { readonly name: string; readonly eventsRatio: number; readonly cpuRatio: number } | null
  /** Read back afterwards; per-flow order as seen by the receiver. */
  readonly check: { readonly ok: boolean; readonly acked?: number; readonly receipts?: number; readonly total?: number; readonly orderViolations: number }
  readonly interleavedCeiling?: CeilingResult | null
  readonly peer?: PeerResult | PeerFailure
}

/** The whole section as written to the JSON. */
export interface ThroughputResult {
  readonly plan: ThroughputPlan
  readonly enqueue: { readonly events: number; readonly seconds: number; readonly eventsPerSecond: number; readonly cpuUsPerEvent: number }
  readonly normalSupported: boolean
  readonly rows: ReadonlyArray<Row>
}

const ourOrder = "per flow, fair turns across flows"

/** The template: enqueued one call at a time through the library (timed), and an empty Counter inbox. */
const buildTemplate = async (plan: ThroughputPlan) => {
  const queueFile = freshWorkFile("throughput-template.queue.db")
  const inboxFile = freshWorkFile("throughput-template.inbox.db")
  const enqueue = await Effect.runPromise(
    Effect.gen(function*() {
      const queue = yield* RelayQueue
      const cpu = process.cpuUsage()
      const started = performance.now()
      for (let i = 0; i < plan.events; i++) yield* queue.enqueue(eventInput(i, plan.flows))
      const seconds = (performance.now() - started) / 1000
      const used = process.cpuUsage(cpu)
      return { events: plan.events, seconds, eventsPerSecond: plan.events / seconds, cpuUsPerEvent: (used.user + used.system) / plan.events }
    }).pipe(Effect.provide(SqliteRelayQueue.layer(sqliteOptions(queueFile, { policy: benchPolicy }))), TickClock.at(0), Effect.orDie)
  )
  await Effect.runPromise(
    Effect.gen(function*() {
      yield* SqliteInbox.make({ filename: inboxFile, business: Counter.business(yield* Ref.make(1000)) })
    }).pipe(Effect.scoped, Effect.orDie)
  )
  checkpoint(queueFile)
  checkpoint(inboxFile)
  return { queueFile, inboxFile, enqueue }
}

const freshCopy = (template: { readonly queueFile: string; readonly inboxFile: string }, name: string) => {
  const queueFile = freshWorkFile(`throughput-${name}.queue.db`)
  const inboxFile = freshWorkFile(`throughput-${name}.inbox.db`)
  fs.copyFileSync(template.queueFile, queueFile)
  fs.copyFileSync(template.inboxFile, inboxFile)
  return { queueFile, inboxFile, remove: () => { removeDb(queueFile); removeDb(inboxFile) } }
}

const readInbox = (inboxFile: string) => {
  const db = new Database(inboxFile, { readonly: true })
  try {
    return db.prepare("SELECT (SELECT COUNT(*) FROM inbox_receipt) AS receipts, (SELECT COALESCE(SUM(total), 0) FROM counter_total) AS total")
      .get() as { receipts: number; total: number }
  } finally {
    db.close()
  }
}

const syncLabel = (s: Synchronous) => s.toUpperCase()

/** Runs the table: floor and ours at each durability, then (optionally) the peers. */
export const measureThroughput = async (
  plan: ThroughputPlan,
  withPeers: boolean,
  log: (line: string) => void
): Promise<ThroughputResult> => {
  log(`throughput: enqueueing ${plan.events.toLocaleString("en")} events over ${plan.flows} flows one call at a time (RelayQueue.enqueue)`)
  const template = await buildTemplate(plan)
  log(`  enqueue: ${template.enqueue.eventsPerSecond.toFixed(0)} events/s, CPU ${template.enqueue.cpuUsPerEvent.toFixed(0)} µs/event`)

  // Does the library take `synchronous: "normal"` yet? Read the pragma back from a connection it opened.
  const probe = freshCopy(template, "probe")
  const normalRead = await Effect.runPromise(readSynchronous(probe.inboxFile, "normal")).catch((e) => `error: ${String(e)}`)
  probe.remove()
  const normalSupported = normalRead === "NORMAL"
  log(`  synchronous: "normal" → the library's inbox connection reads PRAGMA synchronous = ${normalRead}${normalSupported ? "" : " (our rows at NORMAL fail)"}`)

  const rows: Array<Row> = []
  const floors = new Map<string, Row>()
  const push = (row: Row) => {
    rows.push(row)
    const ratio = row.floor === null ? "" : `, ${row.floor.eventsRatio.toFixed(2)}× ${row.floor.name} (CPU ${row.floor.cpuRatio.toFixed(1)}×)`
    log(
      `  ${row.name} [${row.durability}]: ${row.status === "ok" ? `${row.drained}/${plan.events} in ${row.seconds.toFixed(2)} s = ` +
        `${row.eventsPerSecond.toFixed(0)} events/s, CPU ${row.cpuUsPerEvent.toFixed(0)} µs/event${ratio}, check ${row.check.ok ? "ok" : "FAILED"}` : `${row.status}${row.note ? `: ${row.note}` : ""}`}`
    )
  }
  const against = (floorName: string, eventsPerSecond: number, cpuUsPerEvent: number) => {
    const floor = floors.get(floorName)
    return floor === undefined || floor.status !== "ok"
      ? null
      : { name: floor.name, eventsRatio: eventsPerSecond / floor.eventsPerSecond, cpuRatio: cpuUsPerEvent / floor.cpuUsPerEvent }
  }

  /** The floor at `batchSize`; `exchange`: settle and next claim in one commit, as one daemon worker does. */
  const floorRow = (synchronous: Synchronous, batchSize: number, exchange = false): Row => {
    const kind = exchange ? "exchange" : batchSize === 1 ? "single" : "batch"
    const label = exchange ? "single-step, settle + next claim in one commit" : batchSize === 1 ? "single-step" : `batched n=${batchSize}`
    const name = `floor ${label} ${syncLabel(synchronous)}`
    const files = freshCopy(template, "floor")
    try {
      const loop = floorDrain({ ...files, batchSize, exchange, synchronous, leaseTicks, maxSeconds: plan.maxSeconds })
      const acked = countAcked(files.queueFile)
      const inbox = readInbox(files.inboxFile)
      const row: Row = {
        name,
        system: "floor",
        mode: batchSize === 1 ? "single" : "batch",
        synchronous,
        durability: `SQLite WAL, 2 files (${loop.pragmas.queue})`,
        order: ourOrder,
        status: "ok",
        drained: loop.drained,
        complete: loop.complete,
        seconds: loop.seconds,
        eventsPerSecond: loop.drained / loop.seconds,
        cpuUsPerEvent: (loop.cpuSeconds * 1e6) / Math.max(1, loop.drained),
        commits: loop.commits,
        floor: null,
        check: {
          ok: acked === loop.drained && inbox.receipts === loop.drained && inbox.total === loop.drained && loop.orderViolations === 0,
          acked,
          receipts: inbox.receipts,
          total: inbox.total,
          orderViolations: loop.orderViolations
        }
      }
      floors.set(`${kind}-${synchronous}`, row)
      return row
    } finally {
      files.remove()
    }
  }

  /** A row of ours that could not be measured, with why. */
  const unmeasured = (
    base: Pick<Row, "name" | "system" | "mode" | "order"> & { readonly synchronous: Synchronous },
    note: string,
    orderViolations: number
  ): Row => ({
    ...base,
    durability: `SQLite WAL, synchronous=${syncLabel(base.synchronous)}`,
    status: "failed",
    note,
    drained: 0,
    complete: false,
    seconds: 0,
    eventsPerSecond: 0,
    cpuUsPerEvent: 0,
    commits: null,
    floor: null,
    check: { ok: false, orderViolations }
  })

  const oursRow = async (
    synchronous: Synchronous,
    mode: "single" | "batch" | "daemon" | "queue-only",
    workers = plan.daemonWorkers
  ): Promise<Row> => {
    const name = mode === "single"
      ? "ours Relay.step"
      : mode === "batch"
      ? `ours Relay.stepBatch(${plan.batchSize})`
      : mode === "daemon"
      ? `ours relay.run({ workers: ${workers}, batchSize: 1 })`
      : `ours Relay.stepBatch(${plan.batchSize}), in-memory handler like the peers'`
    const fullName = `${name} ${syncLabel(synchronous)}`
    // One daemon worker drains one event at a time, as `Relay.step` does, but settles and claims
    // the next in one commit: the exchange floor is its measure. The ceiling's bursts go with both.
    const singleStep = mode === "single" || (mode === "daemon" && workers === 1)
    const floorName = `${mode === "daemon" && workers === 1 ? "exchange" : singleStep ? "single" : "batch"}-${synchronous}`
    const base = { name: fullName, system: "fair-relay" as const, mode, synchronous, order: ourOrder }
    // The library was asked for NORMAL: a connection that reads anything else makes the row meaningless.
    if (synchronous === "normal" && !normalSupported) {
      return unmeasured(base, `asked for synchronous "normal", the inbox connection reads ${normalRead}`, 0)
    }
    const files = freshCopy(template, "ours")
    const options = { synchronous, policy: benchPolicy }
    const seen = delivered()
    // The ceiling's bursts go with the single-step FULL drains only: the target divides by it.
    const ceiling = singleStep && synchronous === "full" ? openCeiling("ceiling-throughput.db") : undefined
    let nextBurst = 0
    const onProgress: Progress = (_, seconds) => {
      if (ceiling === undefined || seconds < nextBurst) return
      nextBurst = seconds + plan.interleave.everySeconds
      return aside(() => ceiling.burst(plan.interleave.burstMs))
    }
    try {
      type Outcome = {
        readonly loop: { drained: number; complete: boolean; seconds: number; cpuSeconds: number; queueCommits: number | null; inboxCommits: number | null }
        readonly inbox: { readonly receipts: number; readonly total: number } | null
      }
      const run: Effect.Effect<Outcome> = mode === "queue-only"
        ? drainLoop(plan.batchSize, plan.maxSeconds, false).pipe(
          Effect.map((loop) => ({ loop, inbox: null })),
          Effect.provide(queueOnlyLayer(files.queueFile, options, seen))
        )
        : Effect.all({
          loop: mode === "daemon"
            ? daemonLoop(plan.events, plan.maxSeconds, seen, { workers, batchSize: 1 }, onProgress)
            : drainLoop(mode === "single" ? 1 : plan.batchSize, plan.maxSeconds, true, onProgress),
          inbox: inboxCheck
        }).pipe(Effect.provide(relayLayer(files.queueFile, files.inboxFile, options, seen)))
      const { inbox, loop } = await Effect.runPromise(TickClock.at(0)(run))
      const acked = countAcked(files.queueFile)
      const eventsPerSecond = loop.drained / loop.seconds
      const cpuUsPerEvent = (loop.cpuSeconds * 1e6) / Math.max(1, loop.drained)
      return {
        ...base,
        durability: `SQLite WAL, 2 files (synchronous=${synchronous === "full" ? "FULL" : normalRead})`,
        status: "ok",
        drained: loop.drained,
        complete: loop.complete,
        seconds: loop.seconds,
        eventsPerSecond,
        cpuUsPerEvent,
        commits: loop.queueCommits === null ? null : { queue: loop.queueCommits, inbox: loop.inboxCommits ?? 0 },
        floor: against(floorName, eventsPerSecond, cpuUsPerEvent),
        // The daemon is measured up to its last counted ack; steps in flight then (a partial run)
        // may still finish before the interrupt lands, so its store may hold a few more.
        check: {
          ok: (mode === "daemon" ? acked >= loop.drained : acked === loop.drained) && seen.orderViolations === 0 &&
            (inbox === null || (inbox.receipts === acked && inbox.total === acked)),
          acked,
          ...(inbox === null ? {} : { receipts: inbox.receipts, total: inbox.total }),
          orderViolations: seen.orderViolations
        },
        interleavedCeiling: ceiling?.result() ?? null
      }
    } catch (error) {
      return unmeasured(base, String(error).slice(0, 300), seen.orderViolations)
    } finally {
      ceiling?.close()
      files.remove()
    }
  }

  for (const synchronous of ["full", "normal"] as const) {
    // Floor and ours alternate, so drift of the shared disk hits both alike.
    push(floorRow(synchronous, 1))
    push(await oursRow(synchronous, "single"))
    push(floorRow(synchronous, plan.batchSize))
    push(await oursRow(synchronous, "batch"))
    push(await oursRow(synchronous, "daemon"))
    push(floorRow(synchronous, 1, true))
    push(await oursRow(synchronous, "daemon", 1))
    push(await oursRow(synchronous, "queue-only"))
  }

  if (withPeers) {
    ensurePeersInstalled(log)
    for (const peer of ["plainjob", "liteque", "bullmq"] as const) {
      for (const workers of plan.peerWorkers) {
        const result = await runPeer(peer, { events: plan.events, flows: plan.flows, workers, maxSeconds: plan.maxSeconds })
        const name = `${peer} ${workers} worker${workers === 1 ? "" : "s"}`
        if ("error" in result) {
          push({
            name, system: peer, mode: "peer", synchronous: null, durability: "?", order: "?", status: "failed", note: result.error,
            drained: 0, complete: false, seconds: 0, eventsPerSecond: 0, cpuUsPerEvent: 0, commits: null, floor: null,
            check: { ok: false, orderViolations: 0 }, peer: result
          })
          continue
        }
        const p = result.process
        const sqliteNormal = String(result.durabilitySettings.synchronous ?? "") === "NORMAL"
        push({
          name: `${name} (${result.peer} ${result.version})`,
          system: peer,
          mode: "peer",
          synchronous: sqliteNormal ? "normal" : null,
          durability: result.durability,
          order: result.order,
          status: "ok",
          drained: p.drained,
          complete: p.complete,
          seconds: p.seconds,
          eventsPerSecond: p.eventsPerSecond,
          cpuUsPerEvent: p.cpuUsPerEvent,
          commits: null,
          // SQLite peers at NORMAL against the NORMAL floor; Redis (nothing persisted) against it too, the least durable floor.
          floor: against(`batch-normal`, p.eventsPerSecond, p.cpuUsPerEvent),
          check: { ok: p.complete && p.handled === p.drained, orderViolations: p.orderViolations },
          peer: result
        })
      }
    }
  }
  removeDb(template.queueFile)
  removeDb(template.inboxFile)
  return { plan, enqueue: template.enqueue, normalSupported, rows }
}

const fmt = (x: number, digits = 0) => x.toLocaleString("en", { maximumFractionDigits: digits, minimumFractionDigits: digits })

/** The table as Markdown: name, durability, order guarantee, events/s, CPU µs/event, ratio to the floor. */
export const throughputTable = (result: ThroughputResult): string => {
  const lines = [
    `| ${fmt(result.plan.events)} events, ${result.plan.flows} flows | durability | order guarantee | events/s | CPU µs/event | × floor (events/s; CPU) |`,
    "|---|---|---|---|---|---|"
  ]
  for (const row of result.rows) {
    const figures = row.status === "ok"
      ? `${fmt(row.eventsPerSecond)}${row.complete ? "" : " (partial)"}${row.check.ok ? "" : " (check FAILED)"} | ${fmt(row.cpuUsPerEvent)}`
      : `${row.status} | ${row.status}`
    const ratio = row.floor === null ? "–" : `${row.floor.eventsRatio.toFixed(2)}× ; ${row.floor.cpuRatio.toFixed(1)}× (${row.floor.name})`
    const order = row.check.orderViolations > 0 ? `${row.order} — **${row.check.orderViolations} out of per-key order**` : row.order
    lines.push(`| ${row.name} | ${row.durability} | ${order} | ${figures} | ${ratio} |`)
  }
  return lines.join("\n")
}
