/**
 * Soak: N events through enqueue → claim → receive → settle with a short retention, pruning after
 * every round, sampling the queue and inbox file sizes (main file + WAL). Time is a logical clock:
 * one round (one event per flow) = 1 s, retention: acked events and receipts 10 s, dedup records
 * 20 s — so at most ~10 rounds of acked events, ~20 of dedup records and ~10 of receipts are
 * kept, and the files should stop growing. Writes bench/results/soak-<time>.json and
 * bench/results/soak.svg. Not part of `npm test`, which runs a short version that asserts the
 * bounds and the plateau (test/reliability/retentionSoak.test.ts).
 *
 *   npm run soak                 # 500k events
 *   SOAK_EVENTS=100000 npm run soak
 */
import Database from "better-sqlite3"
import { Effect, Ref } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as SqliteInbox from "../src/layers/SqliteInbox.js"
import * as SqliteRelayQueue from "../src/layers/SqliteRelayQueue.js"
import * as Counter from "../src/sample/Counter.js"
import * as TickClock from "../src/services/TickClock.js"

const events = Number(process.env.SOAK_EVENTS ?? 500_000)
const flows = 1_000
const samples = 100
const resultsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "results")

const size = (file: string) => [file, `${file}-wal`].reduce((sum, f) => sum + (fs.existsSync(f) ? fs.statSync(f).size : 0), 0)

interface Sample {
  readonly events: number
  readonly queueBytes: number
  readonly inboxBytes: number
}

const pages = (file: string) => {
  const db = new Database(file, { readonly: true })
  const read = (pragma: string) => Number(db.pragma(pragma, { simple: true }))
  const result = { pageCount: read("page_count"), freelistCount: read("freelist_count"), pageSize: read("page_size") }
  db.close()
  return result
}

const program = Effect.gen(function*() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "fair-relay-soak-"))
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
    const rounds = Math.ceil(events / flows)
    const every = Math.max(1, Math.floor(rounds / samples))
    const series: Array<Sample> = []
    const pruned = { events: 0, dedup: 0, receipts: 0 }
    const started = Date.now()
    for (let round = 0; round < rounds; round++) {
      yield* clock.set(round * 1_000)
      yield* queue.enqueueBatch(
        Array.from({ length: flows }, (_, f) => ({ eventId: `e${round}-${f}`, flowId: `f${f}`, body: { delta: 1 } }))
      )
      const claims = yield* queue.claimBatch(flows)
      const replies = yield* inbox.receiveBatch(claims.map((c) => ({ eventId: c.event.eventId, flowId: c.event.flowId, seq: c.event.seq, body: c.event.body })))
      yield* queue.settleBatch(claims.map((c, i) => ({ token: c.token, reply: replies[i]! })))
      const q = yield* queue.prune()
      const r = yield* inbox.prune()
      pruned.events += q.events
      pruned.dedup += q.dedup
      pruned.receipts += r.receipts
      if (round % every === 0 || round === rounds - 1) {
        series.push({ events: (round + 1) * flows, queueBytes: size(files.queue), inboxBytes: size(files.inbox) })
      }
    }
    const stats = yield* queue.stats
    return { series, pruned, stats, seconds: (Date.now() - started) / 1000 }
  })
  const { pruned, seconds, series, stats } = yield* Effect.scoped(Effect.withClock(run, clock.clock))
  const last = series[series.length - 1]!
  const half = series.find((s) => s.events >= last.events / 2)!
  const result = {
    timestamp: new Date().toISOString(),
    events: last.events,
    flows,
    retention: { ackedMillis: 10_000, dedupMillis: 20_000, receiptsMillis: 10_000, roundMillis: 1_000 },
    seconds,
    pruned,
    byState: stats.byState,
    plateau: { halfwayQueueBytes: half.queueBytes, finalQueueBytes: last.queueBytes, halfwayInboxBytes: half.inboxBytes, finalInboxBytes: last.inboxBytes },
    pages: { queue: pages(files.queue), inbox: pages(files.inbox) },
    series
  }
  fs.rmSync(dir, { recursive: true, force: true })
  return result
})

/** Size over events as an SVG line chart (two series). */
const chart = (series: ReadonlyArray<Sample>, title: string): string => {
  const W = 760, H = 380, L = 80, R = 150, T = 40, B = 50
  const maxX = Math.max(...series.map((s) => s.events))
  const maxY = Math.max(...series.flatMap((s) => [s.queueBytes, s.inboxBytes])) * 1.1
  const x = (v: number) => L + (v / maxX) * (W - L - R)
  const y = (v: number) => H - B - (v / maxY) * (H - T - B)
  const line = (pick: (s: Sample) => number, color: string) =>
    `<polyline fill="none" stroke="${color}" stroke-width="2" points="${series.map((s) => `${x(s.events).toFixed(1)},${y(pick(s)).toFixed(1)}`).join(" ")}"/>`
  const mb = (b: number) => `${(b / 1024 / 1024).toFixed(1)} MB`
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) =>
    `<text x="${L - 8}" y="${y(f * maxY) + 4}" text-anchor="end" font-size="11">${mb(f * maxY)}</text>` +
    `<line x1="${L}" x2="${W - R}" y1="${y(f * maxY)}" y2="${y(f * maxY)}" stroke="#ddd"/>` +
    `<text x="${x(f * maxX)}" y="${H - B + 18}" text-anchor="middle" font-size="11">${Math.round(f * maxX / 1000)}k</text>`
  ).join("")
  const lastS = series[series.length - 1]!
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="${L}" y="24" font-size="14">${title}</text>
${ticks}
${line((s) => s.queueBytes, "#1f77b4")}
${line((s) => s.inboxBytes, "#d62728")}
<text x="${W - R + 8}" y="${y(lastS.queueBytes) + 4}" font-size="12" fill="#1f77b4">queue ${mb(lastS.queueBytes)}</text>
<text x="${W - R + 8}" y="${y(lastS.inboxBytes) + 16}" font-size="12" fill="#d62728">inbox ${mb(lastS.inboxBytes)}</text>
<text x="${(L + W - R) / 2}" y="${H - 12}" text-anchor="middle" font-size="12">events through enqueue → claim → receive → settle</text>
</svg>
`
}

Effect.runPromise(program).then((result) => {
  fs.mkdirSync(resultsDir, { recursive: true })
  const stamp = result.timestamp.replace(/[:.]/g, "-")
  const { series, ...summary } = result
  fs.writeFileSync(path.join(resultsDir, `soak-${stamp}.json`), JSON.stringify(result, null, 2) + "\n")
  fs.writeFileSync(
    path.join(resultsDir, "soak.svg"),
    chart(series, `SQLite file sizes (main + WAL), retention 10 s at 1 s per ${result.flows} events`)
  )
  console.log(JSON.stringify(summary, null, 2))
})
