/**
 * How long a bulk redrive takes in an incident: `heads` quarantined heads (one per flow, the only
 * shape there is: a flow has at most one quarantined head) in `groups` groups, then one
 * `redriveAll` of every head of the store in pages of 100 — on a SQLite file (synchronous FULL)
 * and, with a URL, on PostgreSQL in both claim modes. Prints the figures and writes them as JSON;
 * not part of `npm run bench`.
 *
 *   npx tsx bench/redriveAll.ts [--heads 500] [--groups 5] [--pg postgres://…/db] [--json FILE]
 */
import { Effect, Scope } from "effect"
import * as fs from "node:fs"
import pg from "pg"
import type { RelayQueueService } from "../src/index.js"
import { PgRelayQueue, SqliteRelayQueue } from "../src/index.js"
import { freshWorkFile, removeDb } from "./stores.js"

const option = (name: string) => {
  const at = process.argv.indexOf(name)
  return at === -1 ? undefined : process.argv[at + 1]
}
const heads = Number(option("--heads") ?? 500)
const groups = Number(option("--groups") ?? 5)
const pgUrl = option("--pg")
const out = option("--json")

/** Fills `queue` with `heads` flows of one event each, claims every head and refuses it: all quarantined. */
const quarantineAll = (queue: RelayQueueService) =>
  Effect.gen(function*() {
    yield* queue.enqueueBatch(Array.from({ length: heads }, (_, i) => ({
      eventId: `e${i}`,
      flowId: `f${String(i).padStart(5, "0")}`,
      group: `tenant-${i % groups}`,
      body: { i }
    })))
    for (;;) {
      const claims = yield* queue.claimBatch(100)
      if (claims.length === 0) break
      yield* queue.settleBatch(claims.map((c) => ({ token: c.token, reply: { _tag: "Rejected" as const, code: "receiver bug" } })))
    }
    return (yield* queue.stats).byState.quarantined
  })

/** The wall time of one `redriveAll` of every quarantined head, and what it did. */
const timeRedrive = (queue: RelayQueueService) =>
  Effect.gen(function*() {
    const start = performance.now()
    const result = yield* queue.redriveAll({ filter: { all: true }, reason: "receiver fixed", actor: "bench", pageSize: 100 })
    const millis = performance.now() - start
    const audit = (yield* queue.audit({ limit: 1000 })).length
    return { millis: Math.round(millis * 10) / 10, redriven: result.heads.length, pages: result.pages, auditRows: audit }
  })

const run = (name: string, open: Effect.Effect<RelayQueueService, unknown, Scope.Scope>) =>
  Effect.scoped(Effect.gen(function*() {
    const queue = yield* open
    const quarantined = yield* quarantineAll(queue)
    const timed = yield* timeRedrive(queue)
    const line = { store: name, heads, groups, quarantined, ...timed }
    console.log(JSON.stringify(line))
    return line
  }))

const main = Effect.gen(function*() {
  const results = []
  const file = freshWorkFile("redrive-all.db")
  results.push(yield* run("sqlite", SqliteRelayQueue.make({ filename: file })))
  removeDb(file)
  if (pgUrl !== undefined) {
    for (const claims of ["exact", "parallel"] as const) {
      const database = `fair_relay_bench_redrive_${process.pid}_${claims}`
      const admin = new pg.Client({ connectionString: pgUrl })
      yield* Effect.promise(async () => {
        await admin.connect()
        await admin.query(`CREATE DATABASE ${database}`)
      })
      const url = new URL(pgUrl)
      url.pathname = `/${database}`
      try {
        results.push(yield* run(`postgres-${claims}`, PgRelayQueue.make({ url: url.toString(), claims })))
      } finally {
        yield* Effect.promise(async () => {
          await admin.query(`DROP DATABASE ${database} WITH (FORCE)`)
          await admin.end()
        })
      }
    }
  }
  if (out !== undefined) fs.writeFileSync(out, JSON.stringify({ at: new Date().toISOString(), node: process.version, results }, null, 2) + "\n")
})

Effect.runPromise(main).catch((error) => {
  console.error(error)
  process.exit(1)
})
