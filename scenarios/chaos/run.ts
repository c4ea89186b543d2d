/**
 * The chaos run: K worker processes and one producer process over one queue file and one
 * receiver file; the parent SIGKILLs them at random moments — some while they are stopped inside
 * a transaction at a fault point, some between two commits, some at any instant — and restarts
 * them, until every event is acked. Then it checks the invariants on the two stores:
 *
 * - nothing lost: every one of the F × E events is in the queue, acked, with one receipt and one
 *   effect;
 * - no duplicates: no event has two effects (the effect log is the business's own table);
 * - order: each flow's effects were applied in seq order 1, 2, …, E (the effect log's
 *   autoincrement order), receipts and the enqueue-time seqs agree;
 * - consistency: the projection's totals equal the sums of the deltas, the receiver's progress
 *   is E for every flow, every flow of the queue is drained, nothing is quarantined, and the
 *   queue's acked events are exactly the receiver's receipts.
 */
import Database from "better-sqlite3"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { SqliteInbox, SqliteRelayQueue } from "../../src/index.js"
import type { Snapshot } from "../../src/index.js"
import type { Child, ChildMessage } from "../processes/spawn.js"
import { spawnChild } from "../processes/spawn.js"
import { business, deltaOf, effects, eventId, flowId, prng } from "./business.js"
import type { EffectRow } from "./business.js"
import type { ProducerConfig } from "./producer.js"
import type { WorkerConfig } from "./worker.js"

/** Options of a chaos run. */
export interface ChaosOptions {
  readonly workers: number
  readonly flows: number
  readonly events: number
  /** How many SIGKILLs to spread over the run (paced by progress). */
  readonly kills: number
  readonly seed: number
  /** Fraction of deliveries answered `Retry` / `Gap` by the transport (default 0.15 / 0.1). */
  readonly retryRate?: number | undefined
  readonly gapRate?: number | undefined
  /** Probability that a worker stops at a fault point and lets the parent decide (default 0.05). */
  readonly pauseRate?: number | undefined
  /** Probability that the parent kills a worker stopped at a fault point (default 0.4). */
  readonly killAtPauseRate?: number | undefined
  /**
   * The queue's clock policy in every process (default "strict", the seed's: a write
   * whose clock reads below the persisted tick fails with ClockRegressed, which a worker reports
   * as a failed step and retries; with one machine's clock read under the lock it never happens).
   */
  readonly clock?: "strict" | "clamp" | undefined
  /** Lease of a claim, in ms (default 2000). */
  readonly leaseMs?: number | undefined
  /** Gives up when no event gets acked for this long (default 120 s). */
  readonly stallMs?: number | undefined
  /** Directory for the two store files (default: a fresh temporary directory). */
  readonly dir?: string | undefined
  /** Keep the store files (they are kept anyway when a violation is found). */
  readonly keep?: boolean | undefined
  /** Progress lines (to stderr in the CLI). */
  readonly log?: ((line: string) => void) | undefined
}

/** What a chaos run found. */
export interface ChaosResult {
  readonly kills: number
  /** Kills of a worker stopped inside a transaction (at a `*:before-commit` point). */
  readonly midTransactionKills: number
  /** Kills of a worker stopped between two commits (at a `*:after-commit` point). */
  readonly betweenCommitKills: number
  /** Kills at an arbitrary instant (a timer), workers and producer alike. */
  readonly randomKills: number
  readonly producerKills: number
  readonly restarts: number
  readonly events: number
  readonly acked: number
  readonly lost: number
  readonly duplicates: number
  readonly orderViolations: number
  readonly inconsistencies: number
  /** Replies the workers reported, by tag (synthetic ones separately). */
  readonly replies: Readonly<Record<string, number>>
  /** Failed steps reported by workers (the loop retries them), by error tag. */
  readonly workerErrors: Readonly<Record<string, number>>
  /** Children that exited on their own with a non-zero code (not killed by us). */
  readonly unexpectedExits: number
  readonly stalled: boolean
  /** Descriptions of the first violations found. */
  readonly details: ReadonlyArray<string>
  readonly seconds: number
  readonly dir: string
  /** The one-line summary. */
  readonly summary: string
  /** No violation and every event acked. */
  readonly ok: boolean
}

const script = (name: string) => fileURLToPath(new URL(`./${name}`, import.meta.url))

interface Slot {
  readonly role: "worker" | "producer"
  readonly index: number
  child: Child | undefined
  alive: boolean
  ready: boolean
  killed: boolean
  done: boolean
  starts: number
}

const MaxDetails = 30

/** Runs the chaos scenario and checks its invariants. Never throws for a violation: see `ok`. */
export const runChaos = async (options: ChaosOptions): Promise<ChaosResult> => {
  const started = Date.now()
  const log = options.log ?? (() => {})
  const total = options.flows * options.events
  const dir = options.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), "fair-relay-chaos-"))
  fs.mkdirSync(dir, { recursive: true })
  const queueFile = path.join(dir, "queue.db")
  const inboxFile = path.join(dir, "inbox.db")
  const random = prng(options.seed)
  const busyTimeoutMs = 30_000
  const workerBase = {
    queueFile,
    inboxFile,
    retryRate: options.retryRate ?? 0.15,
    gapRate: options.gapRate ?? 0.1,
    pauseRate: options.pauseRate ?? 0.05,
    leaseMs: options.leaseMs ?? 2_000,
    backoffBaseMs: 5,
    backoffCapMs: 50,
    busyTimeoutMs,
    clock: options.clock ?? "strict"
  }
  const killAtPause = options.killAtPauseRate ?? 0.4
  const stallMs = options.stallMs ?? 120_000

  // Both stores exist (and are migrated) before any child opens them; the queue store keeps the
  // protocol the workers run (the producer adopts it).
  const protocol = {
    leaseTicks: workerBase.leaseMs,
    retryBudget: 1_000_000,
    backoffBase: workerBase.backoffBaseMs,
    backoffCap: workerBase.backoffCapMs,
    admission: "seed" as const
  }
  await Effect.runPromise(Effect.scoped(Effect.asVoid(SqliteRelayQueue.make({ filename: queueFile, policy: protocol }))))
  await Effect.runPromise(Effect.scoped(Effect.asVoid(SqliteInbox.make({ filename: inboxFile, business: business() }))))

  const details: Array<string> = []
  const detail = (text: string) => {
    if (details.length < MaxDetails) details.push(text)
  }
  const replies: Record<string, number> = {}
  const workerErrors: Record<string, number> = {}
  const counts = { kills: 0, mid: 0, between: 0, random: 0, producer: 0, restarts: 0, unexpectedExits: 0, ackMessages: 0 }
  let producerViolations = 0
  let unexpectedReplies = 0
  let stopping = false

  const slots: Array<Slot> = [
    { role: "producer", index: 0, child: undefined, alive: false, ready: false, killed: false, done: false, starts: 0 },
    ...Array.from({ length: options.workers }, (_, index): Slot => ({
      role: "worker",
      index,
      child: undefined,
      alive: false,
      ready: false,
      killed: false,
      done: false,
      starts: 0
    }))
  ]

  // The progress seen in the queue file (authoritative) and in the workers' reports (faster).
  const probe = new Database(queueFile, { fileMustExist: true })
  probe.pragma("busy_timeout = 5000")
  const ackedQuery = probe.prepare("SELECT COUNT(*) AS n FROM relay_event WHERE state = 'acked'")
  let dbAcked = 0
  const progress = () => Math.max(dbAcked, counts.ackMessages) / total

  /** How many kills the run may have made by now: spread over the progress, all done by ~93%. */
  const allowance = () => Math.min(options.kills, Math.floor(options.kills * Math.min(1, progress() * 1.08)) + 2)

  const kill = (slot: Slot, kind: "mid" | "between" | "random") => {
    if (!slot.alive || slot.killed || slot.child === undefined || stopping) return false
    slot.killed = true
    slot.child.kill()
    counts.kills++
    counts[kind]++
    if (slot.role === "producer") counts.producer++
    return true
  }

  const onMessage = (slot: Slot, child: Child, message: ChildMessage) => {
    switch (message.type) {
      case "ready":
        if (slot.child === child) slot.ready = true
        return
      case "at": {
        if (slot.child !== child) return // a late line of a process that is gone
        const point = String(message.point)
        if (!stopping && counts.kills < allowance() && random() < killAtPause) {
          if (kill(slot, point.endsWith("before-commit") ? "mid" : "between")) return
        }
        child.send({ cmd: "continue" })
        return
      }
      case "step": {
        const key = message.synthetic === true ? `synthetic ${String(message.reply)}` : String(message.reply)
        replies[key] = (replies[key] ?? 0) + 1
        if (message.outcome === "Acked") counts.ackMessages++
        // The real receiver never refuses our events, and with the queue's order it never sees a gap.
        if (message.synthetic !== true && !["Accepted", "Duplicate"].includes(String(message.reply))) {
          unexpectedReplies++
          detail(`receiver answered ${String(message.reply)} for ${String(message.eventId)} (generation ${String(message.generation)})`)
        }
        if (message.outcome === "Quarantined") detail(`${String(message.eventId)} was quarantined`)
        return
      }
      case "error": {
        const tag = String(message.tag)
        workerErrors[tag] = (workerErrors[tag] ?? 0) + 1
        if ((workerErrors[tag] ?? 0) <= 3) log(`${slot.role} ${slot.index} step failed: ${String(message.message)}`)
        return
      }
      case "violation":
        producerViolations++
        detail(`producer: ${String(message.message)}`)
        return
      case "done":
        slot.done = true
        log(`producer done: ${String(message.enqueued)} enqueued, ${String(message.existing)} already there`)
        return
      default:
        return
    }
  }

  const start = (slot: Slot) => {
    const config: WorkerConfig | ProducerConfig = slot.role === "worker"
      ? { ...workerBase, seed: (options.seed * 31 + slot.index * 1_000_003 + slot.starts * 7_919) | 0 }
      : { queueFile, flows: options.flows, events: options.events, seed: options.seed, maxBatch: 20, busyTimeoutMs, clock: workerBase.clock }
    const child = spawnChild(script(slot.role === "worker" ? "worker.ts" : "producer.ts"), [JSON.stringify(config)])
    slot.child = child
    slot.alive = true
    slot.ready = false
    slot.killed = false
    slot.starts++
    let exited = false
    void (async () => {
      for (;;) {
        try {
          onMessage(slot, child, await child.next(60_000))
        } catch {
          if (exited) return
        }
      }
    })()
    void child.exit.then((exit) => {
      exited = true
      slot.alive = false
      if (!slot.killed && exit.code !== 0) {
        counts.unexpectedExits++
        detail(`${slot.role} ${slot.index} exited by itself (code ${exit.code}, signal ${exit.signal}): ${child.stderr().slice(-500)}`)
      }
      if (stopping || (slot.role === "producer" && slot.done && exit.code === 0)) return
      counts.restarts++
      start(slot)
    })
  }

  for (const slot of slots) start(slot)

  // Kills at arbitrary instants, when the run has been behind its kill allowance for a while
  // (which first gives a worker stopped at a fault point the chance to take the kill).
  let timer: NodeJS.Timeout | undefined
  let behindSince: number | undefined
  let patience = 0
  const tick = () => {
    if (stopping) return
    const behind = allowance() - counts.kills
    if (behind <= 0) {
      behindSince = undefined
    } else if (behindSince === undefined) {
      behindSince = Date.now()
      patience = 200 + Math.floor(random() * 1_000)
    } else if (behind >= 2 || Date.now() - behindSince >= patience) {
      const anyState = random() < 0.1
      const candidates = slots.filter((s) => s.alive && !s.killed && (anyState || s.ready))
      const target = candidates[Math.floor(random() * candidates.length)]
      if (target !== undefined && kill(target, "random")) behindSince = undefined
    }
    timer = setTimeout(tick, 25 + Math.floor(random() * 100))
  }
  timer = setTimeout(tick, 200)

  // Wait until every event is acked (or nothing moves for `stallMs`).
  let stalled = false
  let lastProgress = Date.now()
  let lastLog = Date.now()
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 200))
    const n = (ackedQuery.get() as { n: number }).n
    if (n > dbAcked) lastProgress = Date.now()
    dbAcked = n
    const producer = slots[0]!
    if (dbAcked === total && producer.done) break
    if (Date.now() - lastProgress > stallMs) {
      stalled = true
      detail(`stalled: no event acked for ${stallMs} ms (${dbAcked}/${total} acked)`)
      break
    }
    if (Date.now() - lastLog > 5_000) {
      lastLog = Date.now()
      log(`${dbAcked}/${total} acked, ${counts.kills} kills, ${counts.restarts} restarts, ${((Date.now() - started) / 1000).toFixed(0)} s`)
    }
  }

  // Stop: let each child finish its step and exit; kill what does not (not counted as chaos).
  stopping = true
  if (timer) clearTimeout(timer)
  await Promise.all(slots.map(async (slot) => {
    const child = slot.child
    if (child === undefined || !slot.alive) return
    child.send({ cmd: "continue" })
    child.send({ cmd: "stop" })
    child.end()
    let timeout: NodeJS.Timeout | undefined
    const exited = await Promise.race([
      child.exit.then(() => true),
      new Promise<boolean>((r) => {
        timeout = setTimeout(() => r(false), 15_000)
      })
    ])
    clearTimeout(timeout)
    if (!exited) {
      child.kill()
      await child.exit
    }
  }))
  probe.close()

  // ---- the invariants -------------------------------------------------------------------------
  const { effectRows, progressMap, receipts, snapshot, totals } = await Effect.runPromise(
    Effect.scoped(
      Effect.gen(function*() {
        const queue = yield* SqliteRelayQueue.make({ filename: queueFile })
        const inbox = yield* SqliteInbox.make({ filename: inboxFile, business: business() })
        const snapshot: Snapshot = yield* queue.snapshot
        const receipts = yield* inbox.receipts
        const progressMap = yield* inbox.progress
        const effectRows: ReadonlyArray<EffectRow> = yield* inbox.read(effects)
        const totals = yield* inbox.read((sql) =>
          Effect.map(sql<{ flow_id: string; total: unknown }>`SELECT flow_id, total FROM counter_total`, (rows) =>
            new Map(rows.map((r) => [r.flow_id, Number(r.total)]))))
        return { snapshot, receipts, progressMap, effectRows, totals }
      })
    )
  )

  const queued = new Map(snapshot.events.map((e) => [e.eventId as string, e]))
  const receiptById = new Map(receipts.map((r) => [r.eventId, r]))
  const effectCount = new Map<string, number>()
  for (const row of effectRows) effectCount.set(row.eventId, (effectCount.get(row.eventId) ?? 0) + 1)

  let acked = 0
  let lost = 0
  let duplicates = 0
  let orderViolations = unexpectedReplies
  let inconsistencies = producerViolations + counts.unexpectedExits

  const expectedIds = new Set<string>()
  for (let f = 0; f < options.flows; f++) {
    let sum = 0
    for (let seq = 1; seq <= options.events; seq++) {
      const id = eventId(f, seq)
      expectedIds.add(id)
      sum += deltaOf(f, seq)
      const event = queued.get(id)
      const receipt = receiptById.get(id)
      const applied = effectCount.get(id) ?? 0
      if (event?.state === "acked") acked++
      if (event === undefined || event.state !== "acked" || receipt === undefined || applied === 0) {
        lost++
        detail(`${id} lost: queue ${event?.state ?? "absent"}, receipt ${receipt ? "yes" : "no"}, effects ${applied}`)
      }
      if (applied > 1) {
        duplicates += applied - 1
        detail(`${id} applied ${applied} times`)
      }
      if (event !== undefined && (event.flowId !== flowId(f) || event.seq !== seq)) {
        orderViolations++
        detail(`${id} stored as ${event.flowId}#${event.seq}`)
      }
      if (receipt !== undefined && (receipt.flowId !== flowId(f) || receipt.seq !== seq)) {
        orderViolations++
        detail(`${id} received as ${receipt.flowId}#${receipt.seq}`)
      }
      if (event?.state === "quarantined") {
        inconsistencies++
        detail(`${id} quarantined: ${event.reason ?? ""}`)
      }
      if ((event?.state === "acked") !== (receipt !== undefined)) {
        inconsistencies++
        detail(`${id}: queue ${event?.state ?? "absent"} but receipt ${receipt ? "present" : "absent"}`)
      }
    }
    const flow = flowId(f)
    if (totals.get(flow) !== sum) {
      inconsistencies++
      detail(`${flow}: projection total ${String(totals.get(flow))}, expected ${sum}`)
    }
    if (progressMap.get(flow) !== options.events) {
      inconsistencies++
      detail(`${flow}: receiver progress ${String(progressMap.get(flow))}, expected ${options.events}`)
    }
    const flowRow = snapshot.flows.find((r) => r.flowId === flow)
    if (flowRow === undefined || flowRow.seq !== options.events || flowRow.headSeq !== null) {
      inconsistencies++
      detail(`${flow}: queue flow row ${JSON.stringify(flowRow)}`)
    }
  }
  // Anything the stores hold that the run never produced.
  for (const id of queued.keys()) if (!expectedIds.has(id)) inconsistencies++, detail(`unexpected queue event ${id}`)
  for (const id of receiptById.keys()) if (!expectedIds.has(id)) inconsistencies++, detail(`unexpected receipt ${id}`)
  for (const id of effectCount.keys()) if (!expectedIds.has(id)) duplicates++, detail(`unexpected effect ${id}`)

  // Order of application: per flow, the effect log must read seq 1, 2, 3, … with nothing else.
  const lastApplied = new Map<string, number>()
  for (const row of effectRows) {
    const previous = lastApplied.get(row.flowId) ?? 0
    if (row.seq !== previous + 1) {
      orderViolations++
      detail(`${row.flowId}: effect #${row.n} applied seq ${row.seq} after seq ${previous}`)
    }
    lastApplied.set(row.flowId, Math.max(previous, row.seq))
    const f = Number(row.flowId.slice("flow-".length))
    if (expectedIds.has(row.eventId) && (row.eventId !== eventId(f, row.seq) || row.delta !== deltaOf(f, row.seq))) {
      inconsistencies++
      detail(`${row.eventId}: effect for ${row.flowId}#${row.seq} with delta ${row.delta}`)
    }
  }

  const seconds = (Date.now() - started) / 1000
  const ok = !stalled && lost === 0 && duplicates === 0 && orderViolations === 0 && inconsistencies === 0 && acked === total
  const summary = `kills=${counts.kills} events=${total} acked=${acked} lost=${lost} duplicates=${duplicates} ` +
    `order_violations=${orderViolations} inconsistencies=${inconsistencies} mid_transaction_kills=${counts.mid} ` +
    `between_commit_kills=${counts.between} random_kills=${counts.random} producer_kills=${counts.producer} ` +
    `restarts=${counts.restarts} ` +
    `retry_replies=${(replies["synthetic Retry"] ?? 0)} gap_replies=${(replies["synthetic Gap"] ?? 0)} ` +
    `worker_errors=${Object.values(workerErrors).reduce((a, b) => a + b, 0)} seconds=${seconds.toFixed(1)}`
  if (ok && options.keep !== true && options.dir === undefined) fs.rmSync(dir, { recursive: true, force: true })
  return {
    kills: counts.kills,
    midTransactionKills: counts.mid,
    betweenCommitKills: counts.between,
    randomKills: counts.random,
    producerKills: counts.producer,
    restarts: counts.restarts,
    events: total,
    acked,
    lost,
    duplicates,
    orderViolations,
    inconsistencies,
    replies,
    workerErrors,
    unexpectedExits: counts.unexpectedExits,
    stalled,
    details,
    seconds,
    dir,
    summary,
    ok
  }
}
