/**
 * The floor: fair-relay's protocol statements issued straight through better-sqlite3, no Effect,
 * on the same kind of files as ours (a queue file and a separate inbox file, WAL, the same
 * `synchronous`), created by the library itself so the schema and indexes are exactly ours.
 *
 * Per event (single) or per batch of n heads (batched), three durable transactions, each
 * `BEGIN IMMEDIATE … COMMIT`:
 *  - claim (queue file): clock read, wake check (`MIN(eligible_at)`), turn query on the
 *    `relay_flow_turn` index (`LIMIT n`), then per head: head lookup by (flow, seq), event update,
 *    flow update; clock update;
 *  - receive (inbox file): per delivery: receipt lookup, progress lookup, projection upsert
 *    (the Counter business), receipt insert, progress insert/update;
 *  - settle (queue file): clock read, then per token: event read, generation/state/lease check,
 *    event update (acked), next-head lookup, flow head update; clock update.
 * With `exchange`, as a daemon worker commits: the settle and the next claim in one queue
 * transaction (one clock read and update), so two durable transactions per step, not three.
 * No savepoints, spans, decoding or fibers: the least work that keeps the protocol's guarantees.
 */
import Database from "better-sqlite3"

/** `FULL` (fsync at every commit) or `NORMAL` (WAL: fsync at checkpoints only). */
export type Synchronous = "full" | "normal"

/** What one floor drain did. */
export interface FloorLoop {
  readonly drained: number
  readonly complete: boolean
  readonly seconds: number
  /** CPU time of this process during the loop (user + system), seconds. */
  readonly cpuSeconds: number
  /** Durable commits by file. */
  readonly commits: { readonly queue: number; readonly inbox: number }
  /** `PRAGMA synchronous` / `journal_mode` as read back from both connections. */
  readonly pragmas: { readonly queue: string; readonly inbox: string }
  /** Per-flow order violations seen by the receiver (must be 0). */
  readonly orderViolations: number
}

interface EventRow {
  event_id: string
  flow_id: string
  seq: number
  body: string
  state: string
  next_at: number
  lease_until: number | null
  generation: number
  attempts: number
  lifetime_attempts: number
  reason: string | null
}

interface TurnRow {
  flow_id: string
  head_seq: number
  served: number
  weight: number
  burst: number
}

const syncCode = { full: 2, normal: 1 } as const

const open = (file: string, synchronous: Synchronous) => {
  const db = new Database(file)
  db.pragma("journal_mode = WAL")
  db.pragma(`synchronous = ${synchronous.toUpperCase()}`)
  db.pragma("busy_timeout = 5000")
  const sync = db.pragma("synchronous", { simple: true }) as number
  if (sync !== syncCode[synchronous]) throw new Error(`${file}: PRAGMA synchronous reads ${sync} after setting ${synchronous}`)
  const pragmas = `synchronous=${sync === 2 ? "FULL" : sync === 1 ? "NORMAL" : sync} journal_mode=${String(db.pragma("journal_mode", { simple: true }))}`
  return { db, pragmas }
}

/**
 * Drains the queue in `queueFile` into the inbox in `inboxFile` (both made by the library) at the
 * fixed tick `now`, `batchSize` heads per transaction, until nothing is eligible or `maxSeconds`
 * pass. Every event must be accepted and acked: anything else throws.
 */
export const floorDrain = (options: {
  readonly queueFile: string
  readonly inboxFile: string
  readonly batchSize: number
  /** Settle and claim the next in one transaction, as a daemon worker does (2 commits per step, not 3). */
  readonly exchange?: boolean
  readonly synchronous: Synchronous
  readonly leaseTicks: number
  readonly maxSeconds: number
  readonly now?: number
}): FloorLoop => {
  const now = options.now ?? 0
  const queue = open(options.queueFile, options.synchronous)
  const inbox = open(options.inboxFile, options.synchronous)
  const q = queue.db
  const r = inbox.db
  try {
    const qBegin = q.prepare("BEGIN IMMEDIATE")
    const qCommit = q.prepare("COMMIT")
    const readClock = q.prepare<[], { tick: number; ticket: number }>("SELECT tick, ticket FROM relay_clock WHERE id = 1")
    const writeClock = q.prepare("UPDATE relay_clock SET tick = ?, ticket = ? WHERE id = 1")
    const wakeAt = q.prepare<[], { wake: number | null }>("SELECT MIN(eligible_at) AS wake FROM relay_flow WHERE eligible_at IS NOT NULL")
    const turns = q.prepare<[number, number], TurnRow>(
      `SELECT flow_id, head_seq, served, weight, burst FROM relay_flow
        WHERE eligible_at IS NOT NULL AND +eligible_at <= ? ORDER BY served, flow_id LIMIT ?`
    )
    const eventAt = q.prepare<[string, number], EventRow>("SELECT * FROM relay_event WHERE flow_id = ? AND seq = ?")
    const eventById = q.prepare<[string], EventRow>("SELECT * FROM relay_event WHERE event_id = ?")
    const updateEvent = q.prepare(
      `UPDATE relay_event SET state = ?, next_at = ?, lease_until = ?, generation = ?, attempts = ?,
        lifetime_attempts = ?, reason = ? WHERE event_id = ?`
    )
    const flowClaimed = q.prepare("UPDATE relay_flow SET served = ?, burst = ?, eligible_at = ? WHERE flow_id = ?")
    const flowHead = q.prepare("UPDATE relay_flow SET head_seq = ?, eligible_at = ? WHERE flow_id = ?")

    const rBegin = r.prepare("BEGIN IMMEDIATE")
    const rCommit = r.prepare("COMMIT")
    const receiptOf = r.prepare<[string], { event_id: string; flow_id: string; seq: number; body: string }>(
      "SELECT * FROM inbox_receipt WHERE event_id = ?"
    )
    const progressOf = r.prepare<[string], { last_seq: number }>("SELECT last_seq FROM inbox_progress WHERE flow_id = ?")
    const addToCounter = r.prepare(
      `INSERT INTO counter_total (flow_id, total) VALUES (?, ?)
        ON CONFLICT (flow_id) DO UPDATE SET total = counter_total.total + ?`
    )
    const insertReceipt = r.prepare("INSERT INTO inbox_receipt (event_id, flow_id, seq, body) VALUES (?, ?, ?, ?)")
    const insertProgress = r.prepare("INSERT INTO inbox_progress (flow_id, last_seq) VALUES (?, ?)")
    const updateProgress = r.prepare("UPDATE inbox_progress SET last_seq = ? WHERE flow_id = ?")

    const lastSeen = new Map<string, number>()
    let orderViolations = 0

    /** A queue transaction: the clock read and written once around `body`, which may draw tickets from it. */
    const queueTransaction = <A>(body: (tick: number, ticket: { value: number }) => A): A => {
      qBegin.run()
      try {
        const clock = readClock.get()!
        const tick = Math.max(clock.tick, now)
        const ticket = { value: clock.ticket }
        const result = body(tick, ticket)
        writeClock.run(tick, ticket.value)
        qCommit.run()
        return result
      } catch (error) {
        if (q.inTransaction) q.exec("ROLLBACK")
        throw error
      }
    }

    const claimIn = (limit: number, tick: number, ticket: { value: number }): Array<EventRow> => {
      const claimed: Array<EventRow> = []
      const wake = wakeAt.get()!.wake
      if (wake !== null && wake <= tick) {
        for (const turn of turns.all(tick, limit)) {
          const head = eventAt.get(turn.flow_id, turn.head_seq)!
          if (!(head.state === "ready" ? head.next_at <= tick : head.state === "inflight" && head.lease_until! <= tick)) {
            throw new Error(`flow ${turn.flow_id} caches a head that is not eligible`)
          }
          ticket.value += 1
          const leaseUntil = tick + options.leaseTicks
          const next = { ...head, state: "inflight", generation: head.generation + 1, attempts: head.attempts + 1, lifetime_attempts: head.lifetime_attempts + 1, lease_until: leaseUntil }
          updateEvent.run(next.state, next.next_at, next.lease_until, next.generation, next.attempts, next.lifetime_attempts, next.reason, next.event_id)
          const fresh = turn.burst + 1 >= turn.weight
          flowClaimed.run(fresh ? ticket.value : turn.served, fresh ? 0 : turn.burst + 1, leaseUntil, turn.flow_id)
          claimed.push(next)
        }
      }
      return claimed
    }

    const receive = (events: ReadonlyArray<EventRow>): void => {
      rBegin.run()
      try {
        for (const e of events) {
          const receipt = receiptOf.get(e.event_id)
          const progress = progressOf.get(e.flow_id)
          const last = progress?.last_seq ?? 0
          if (receipt !== undefined || e.seq !== last + 1) throw new Error(`floor receiver: ${e.event_id} is not the next of its flow`)
          const delta = (JSON.parse(e.body) as { delta: number }).delta
          addToCounter.run(e.flow_id, delta, delta)
          insertReceipt.run(e.event_id, e.flow_id, e.seq, e.body)
          if (progress === undefined) insertProgress.run(e.flow_id, e.seq)
          else updateProgress.run(e.seq, e.flow_id)
          if (e.seq !== (lastSeen.get(e.flow_id) ?? 0) + 1) orderViolations++
          lastSeen.set(e.flow_id, e.seq)
        }
        rCommit.run()
      } catch (error) {
        if (r.inTransaction) r.exec("ROLLBACK")
        throw error
      }
    }

    const settleIn = (events: ReadonlyArray<EventRow>, tick: number): void => {
      for (const token of events) {
        const e = eventById.get(token.event_id)
        if (e === undefined || e.generation !== token.generation || e.state !== "inflight") throw new Error(`${token.event_id}: Stale`)
        if (e.lease_until === null || tick >= e.lease_until) throw new Error(`${token.event_id}: Expired`)
        updateEvent.run("acked", e.next_at, null, e.generation, e.attempts, e.lifetime_attempts, e.reason, e.event_id)
        const next = eventAt.get(e.flow_id, e.seq + 1)
        const eligible = next === undefined ? null : next.state === "ready" ? next.next_at : next.state === "inflight" ? next.lease_until : null
        flowHead.run(next?.seq ?? null, eligible, e.flow_id)
      }
    }
    const claim = (limit: number) => queueTransaction((tick, ticket) => claimIn(limit, tick, ticket))
    const settle = (events: ReadonlyArray<EventRow>) => queueTransaction((tick) => settleIn(events, tick))
    // What a daemon worker commits after its delivery: the settle and the next claim in one transaction.
    const exchange = (events: ReadonlyArray<EventRow>, limit: number) =>
      queueTransaction((tick, ticket) => {
        settleIn(events, tick)
        return claimIn(limit, tick, ticket)
      })

    let drained = 0
    let queueCommits = 0
    let inboxCommits = 0
    let complete = false
    // After the first claim, each step receives what it claimed, then settles it and claims the
    // next: in one queue transaction with `exchange`, in two without.
    const settleAndClaimNext = (settled: ReadonlyArray<EventRow>): Array<EventRow> => {
      if (options.exchange === true) {
        queueCommits++
        return exchange(settled, options.batchSize)
      }
      settle(settled)
      queueCommits += 2
      return claim(options.batchSize)
    }
    const cpu = process.cpuUsage()
    const started = performance.now()
    let claimed = claim(options.batchSize)
    queueCommits++
    while (performance.now() - started < options.maxSeconds * 1000) {
      if (claimed.length === 0) {
        complete = true
        break
      }
      receive(claimed)
      inboxCommits++
      const settled = claimed
      claimed = settleAndClaimNext(settled)
      drained += settled.length
    }
    const seconds = (performance.now() - started) / 1000
    const used = process.cpuUsage(cpu)
    return {
      drained,
      complete,
      seconds,
      cpuSeconds: (used.user + used.system) / 1e6,
      commits: { queue: queueCommits, inbox: inboxCommits },
      pragmas: { queue: queue.pragmas, inbox: inbox.pragmas },
      orderViolations
    }
  } finally {
    q.close()
    r.close()
  }
}
