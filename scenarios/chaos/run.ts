/**
 * The chaos run: K worker processes and one producer process over one queue (a SQLite file, or
 * with `pg` a PostgreSQL database of its own) and one receiver file; the parent SIGKILLs them at
 * random moments — some while they are stopped inside a transaction at a fault point, some between
 * two commits, some at any instant — and restarts them, until every event is acked. On PostgreSQL
 * it also terminates the relay's backends (`pg_terminate_backend`) and restarts the server
 * (postgres.ts); the processes ride those out (a failed step is tried again, a store that cannot
 * be opened is retried). Then it checks the invariants on the two stores:
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
import { SqliteInbox } from "../../src/index.js"
import type { Snapshot } from "../../src/index.js"
import type { Child, ChildMessage } from "../processes/spawn.js"
import { spawnChild } from "../processes/spawn.js"
import { business, deltaOf, effects, eventId, flowId, prng } from "./business.js"
import type { EffectRow } from "./business.js"
import { createRun, serverControl, serverFaults } from "./postgres.js"
import type { PgRun, ServerFaultCounts } from "./postgres.js"
import type { ProducerConfig } from "./producer.js"
import { openQueue } from "./stores.js"
import type { QueueStore } from "./stores.js"
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
  /**
   * The workers run the daemon, `Relay.run({ workers: daemon, batchSize: 1 })` — that many worker
   * fibers per process sharing their transactions (group commit) — instead of `Relay.step` in a
   * loop (undefined: the loop).
   */
  readonly daemon?: number | undefined
  /** Gives up when no event gets acked for this long (default 120 s). */
  readonly stallMs?: number | undefined
  /** Directory for the store files (default: a fresh temporary directory). */
  readonly dir?: string | undefined
  /** Keep the store files and database (they are kept anyway when a violation is found). */
  readonly keep?: boolean | undefined
  /** The queue on PostgreSQL instead of SQLite, with the server's faults. */
  readonly pg?: PgChaosOptions | undefined
  /** Progress lines (to stderr in the CLI). */
  readonly log?: ((line: string) => void) | undefined
}

/** The PostgreSQL variant of a run. */
export interface PgChaosOptions {
  /** A server to create the run's throwaway database on (any database of it). */
  readonly url: string
  readonly claims: "exact" | "parallel"
  /** How many times to terminate the relay's backends, spread over the run like the kills. */
  readonly terminations: number
  /** How many times to restart the server (0 with a message on stderr when pg_ctlcluster is missing). */
  readonly restarts: number
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
  /** Processes started again after they ended. */
  readonly respawns: number
  /** PostgreSQL: terminations, the backends they ended, and server restarts (0 on SQLite). */
  readonly terminations: number
  readonly terminatedBackends: number
  readonly serverRestarts: number
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
  /** The run's PostgreSQL database (kept with the files). */
  readonly database?: string | undefined
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
  const pgRun: PgRun | undefined = options.pg && await createRun(options.pg.url)
  if (pgRun) log(`the queue is in database ${pgRun.database} (${options.pg?.claims} claims)`)
  const queue: QueueStore = options.pg && pgRun
    ? { kind: "pg", url: pgRun.url, claims: options.pg.claims }
    : { kind: "sqlite", file: queueFile, busyTimeoutMs }
  const workerBase = {
    queue,
    inboxFile,
    retryRate: options.retryRate ?? 0.15,
    gapRate: options.gapRate ?? 0.1,
    pauseRate: options.pauseRate ?? 0.05,
    leaseMs: options.leaseMs ?? 2_000,
    backoffBaseMs: 5,
    backoffCapMs: 50,
    busyTimeoutMs,
    clock: options.clock ?? "strict",
    daemon: options.daemon
  }
  const killAtPause = options.killAtPauseRate ?? 0.4
  const stallMs = options.stallMs ?? 120_000

  // Both stores exist (and are migrated) before any child opens them; the queue store keeps the
  // protocol the workers run (the producer adopts it) and, on PostgreSQL, the claim mode.
  const protocol = {
    leaseTicks: workerBase.leaseMs,
    retryBudget: 1_000_000,
    backoffBase: workerBase.backoffBaseMs,
    backoffCap: workerBase.backoffCapMs,
    admission: "seed" as const
  }
  await Effect.runPromise(Effect.scoped(Effect.asVoid(openQueue(queue, protocol))))
  await Effect.runPromise(Effect.scoped(Effect.asVoid(SqliteInbox.make({ filename: inboxFile, business: business() }))))

  const details: Array<string> = []
  const detail = (text: string) => {
    if (details.length < MaxDetails) details.push(text)
  }
  const replies: Record<string, number> = {}
  const workerErrors: Record<string, number> = {}
  const counts = { kills: 0, mid: 0, between: 0, random: 0, producer: 0, respawns: 0, unexpectedExits: 0, ackMessages: 0 }
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

  // The progress seen in the queue store (authoritative) and in the workers' reports (faster).
  const probe = pgRun ?? sqliteProbe(queueFile)
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
      : { queue, flows: options.flows, events: options.events, seed: options.seed, maxBatch: 20, clock: workerBase.clock }
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
        detail(`${slot.role} ${slot.index} exited by itself (code ${exit.code}, signal ${exit.signal}): ${child.stderr().trim().slice(0, 700)}`)
      }
      if (stopping || (slot.role === "producer" && slot.done && exit.code === 0)) return
      counts.respawns++
      start(slot)
    })
  }

  for (const slot of slots) start(slot)

  // The server's faults (PostgreSQL), paced by the same progress as the kills.
  const faults = options.pg && pgRun && serverFaults(pgRun, options.pg, pgControl(options.pg.restarts, log), prng(options.seed ^ 0x9e37), log)

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
    faults?.tick(progress())
    timer = setTimeout(tick, 25 + Math.floor(random() * 100))
  }
  timer = setTimeout(tick, 200)

  // Wait until every event is acked (or nothing moves for `stallMs`).
  let stalled = false
  let lastProgress = Date.now()
  let lastLog = Date.now()
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 200))
    const n = (await probe.acked()) ?? dbAcked
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
      const server = faults ? `, ${faults.counts.terminations} terminations, ${faults.counts.restarts} server restarts` : ""
      log(`${dbAcked}/${total} acked, ${counts.kills} kills, ${counts.respawns} respawns${server}, ${((Date.now() - started) / 1000).toFixed(0)} s`)
    }
  }

  // Stop: let each child finish its step and exit; kill what does not (not counted as chaos).
  stopping = true
  if (timer) clearTimeout(timer)
  await faults?.settle()
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

  // ---- the invariants -------------------------------------------------------------------------
  const { effectRows, progressMap, receipts, snapshot, totals } = await Effect.runPromise(
    Effect.scoped(
      Effect.gen(function*() {
        const store = yield* openQueue(queue)
        const inbox = yield* SqliteInbox.make({ filename: inboxFile, business: business() })
        const snapshot: Snapshot = yield* store.snapshot
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
  const server: ServerFaultCounts = faults?.counts ?? { terminations: 0, terminatedBackends: 0, restarts: 0 }
  const summary = `kills=${counts.kills} events=${total} acked=${acked} lost=${lost} duplicates=${duplicates} ` +
    `order_violations=${orderViolations} inconsistencies=${inconsistencies} mid_transaction_kills=${counts.mid} ` +
    `between_commit_kills=${counts.between} random_kills=${counts.random} producer_kills=${counts.producer} ` +
    `respawns=${counts.respawns} terminations=${server.terminations} terminated_backends=${server.terminatedBackends} ` +
    `restarts=${server.restarts} ` +
    `retry_replies=${(replies["synthetic Retry"] ?? 0)} gap_replies=${(replies["synthetic Gap"] ?? 0)} ` +
    `worker_errors=${Object.values(workerErrors).reduce((a, b) => a + b, 0)} ` +
    `${options.pg ? `store=postgres claims=${options.pg.claims} ` : ""}` +
    `${options.daemon === undefined ? "" : `daemon_workers=${options.daemon} `}seconds=${seconds.toFixed(1)}`
  const keep = !ok || options.keep === true
  await probe.close(keep)
  if (!keep && options.dir === undefined) fs.rmSync(dir, { recursive: true, force: true })
  return {
    kills: counts.kills,
    midTransactionKills: counts.mid,
    betweenCommitKills: counts.between,
    randomKills: counts.random,
    producerKills: counts.producer,
    respawns: counts.respawns,
    terminations: server.terminations,
    terminatedBackends: server.terminatedBackends,
    serverRestarts: server.restarts,
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
    database: pgRun?.database,
    summary,
    ok
  }
}

/** The parent's view of the SQLite queue file: acked events, read outside the workers' transactions. */
const sqliteProbe = (queueFile: string) => {
  const db = new Database(queueFile, { fileMustExist: true })
  db.pragma("busy_timeout = 5000")
  const acked = db.prepare("SELECT COUNT(*) AS n FROM relay_event WHERE state = 'acked'")
  return {
    acked: async () => (acked.get() as { n: number }).n,
    close: async (_keep: boolean) => void db.close()
  }
}

/** How the run restarts the server; when it cannot, says so on stderr (the summary then reads restarts=0). */
const pgControl = (restarts: number, log: (line: string) => void) => {
  const control = serverControl()
  if (!control.available && restarts > 0) {
    process.stderr.write(`chaos: server restarts are SKIPPED (${control.reason}); the summary reports restarts=0\n`)
  } else if (control.available && restarts > 0) {
    log(`${restarts} server restart(s) of cluster ${control.cluster} planned`)
  }
  return control
}
