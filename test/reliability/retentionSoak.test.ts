/**
 * Bounded storage under steady traffic: a short, asserting version of `npm run soak`. Real SQLite
 * files, a logical clock (one round of one event per flow = 1 s), retention 10 s for acked events
 * and receipts and 20 s for dedup records, both stores pruned after every round. What is kept is
 * bounded by the retention windows, and the files — the main file and the WAL of each store —
 * stop growing once the windows are full, because SQLite reuses the pages pruning frees.
 *
 * A retention that deletes nothing (or keeps the dedup records, or the receipts) grows each main
 * file by every round's rows, several times its plateau over the second half of the run.
 */
import { it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect, Ref } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { expect } from "vitest"
import * as SqliteInbox from "../../src/layers/SqliteInbox.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import * as Counter from "../../src/sample/Counter.js"
import * as TickClock from "../../src/services/TickClock.js"
import { tempDir } from "../support/backends.js"

const Flows = 100
const Rounds = 200
/** By then every retention window (20 rounds at most) has been full for long. */
const Plateau = 100
const RoundMillis = 1_000

const bytes = (file: string) => (fs.existsSync(file) ? fs.statSync(file).size : 0)
const sizes = (file: string) => ({ main: bytes(file), wal: bytes(`${file}-wal`) })

it.scopedLive(`${Flows} flows × ${Rounds} rounds under a 10 s retention: what is kept stays bounded, and the files stop growing`, () =>
  Effect.gen(function*() {
    const dir = yield* tempDir
    const files = { queue: path.join(dir, "queue.db"), inbox: path.join(dir, "inbox.db") }
    const clock = TickClock.make(0)
    const run = Effect.gen(function*() {
      const queue = yield* SqliteRelayQueue.make({
        filename: files.queue,
        policy: { leaseTicks: 60_000 },
        retention: { acked: "10 seconds", dedup: "20 seconds" }
      })
      const inbox = yield* SqliteInbox.make({
        filename: files.inbox,
        business: Counter.business(yield* Ref.make(1_000_000)),
        retention: { receipts: "10 seconds" }
      })
      const at: Record<string, { queue: ReturnType<typeof sizes>; inbox: ReturnType<typeof sizes> }> = {}
      for (let round = 0; round < Rounds; round++) {
        yield* clock.set(round * RoundMillis)
        yield* queue.enqueueBatch(
          Array.from({ length: Flows }, (_, f) => ({ eventId: `e${round}-${f}`, flowId: `f${f}`, body: { delta: 1 } }))
        )
        const claims = yield* queue.claimBatch(Flows)
        expect(claims).toHaveLength(Flows)
        const replies = yield* inbox.receiveBatch(
          claims.map((c) => ({ eventId: c.event.eventId, flowId: c.event.flowId, seq: c.event.seq, body: c.event.body }))
        )
        yield* queue.settleBatch(claims.map((c, i) => ({ token: c.token, reply: replies[i]! })))
        yield* queue.prune()
        yield* inbox.prune()
        if (round === Plateau || round === Rounds - 1) at[round] = { queue: sizes(files.queue), inbox: sizes(files.inbox) }
      }
      const stats = yield* queue.stats
      const receipts = (yield* inbox.receipts).length
      const totals = yield* inbox.read(Counter.totals)
      return { at, stats, receipts, totals }
    })
    const { at, receipts, stats, totals } = yield* Effect.withClock(run, clock.clock)

    // Every event went through; only those of the last 10 s are kept (10 or 11 rounds, as the
    // window's edge counts).
    expect(stats.byState).toMatchObject({ ready: 0, inflight: 0, quarantined: 0 })
    expect(stats.byState.acked).toBeGreaterThanOrEqual(10 * Flows)
    expect(stats.byState.acked).toBeLessThanOrEqual(11 * Flows)
    expect(receipts).toBeGreaterThanOrEqual(10 * Flows)
    expect(receipts).toBeLessThanOrEqual(11 * Flows)
    expect([...totals.values()].every((total) => total === Rounds)).toBe(true)
    // Dedup records (what pruning keeps of a deleted event): 20 s of them, no more.
    const db = new Database(files.queue, { readonly: true })
    const dedup = Number(db.prepare("SELECT count(*) AS n FROM relay_pruned").pluck().get())
    db.close()
    expect(dedup).toBeLessThanOrEqual(21 * Flows)

    // The second half of the run adds (almost) nothing to any file: a little for the b-trees'
    // settling, where a retention that kept the rows would add every round's.
    const early = at[Plateau]!
    const late = at[Rounds - 1]!
    console.log(`file sizes at round ${Plateau} and ${Rounds - 1}: ${JSON.stringify(early)} ${JSON.stringify(late)}`)
    for (const store of ["queue", "inbox"] as const) {
      for (const part of ["main", "wal"] as const) {
        expect(late[store][part], `${store} ${part}`).toBeLessThanOrEqual(Math.ceil(early[store][part] * 1.1))
      }
    }
  }), 60_000)
