/**
 * This tree's PostgreSQL daemon step against another checkout's, in one process: two fresh
 * databases with the same backlog (`flows` flows), then blocks of `steps` `settleAndClaim` (exact claims; parallel with `--parallel`)
 * steps (`batch` settles and a claim of `batch`, as the worker daemon sends them; default 1) taken by each in turn, the order
 * of the pair alternating, so that what the machine does meanwhile falls on both alike. Prints
 * each side's wall and CPU per step (median and mean over the blocks) and in how many blocks this
 * tree was faster. For before/after comparisons on a noisy machine; not part of `npm run bench`.
 *
 *   git worktree add /tmp/base <commit> && ln -s "$PWD/node_modules" /tmp/base/node_modules
 *   npx tsx bench/pg/ab.ts /tmp/base [blocks 30] [steps 150] [flows 2000] [batch 1] [--url postgres://…/postgres] [--parallel]
 *
 * With `--inbox`, a step is one inbox receive instead (`PgInbox` with the Counter business, a
 * delivery of each of `flows` flows in turn, in seq order; `batch` does not apply).
 *
 *   npx tsx bench/pg/ab.ts /tmp/base [blocks 30] [steps 150] [flows 64] --inbox
 *
 * With `--url` through `bench/pg/latency.mjs`, the database is a network hop away. The side
 * opened second (this tree) measured ~3 % slower with the same code on both sides (0.970 single
 * steps, 0.967 batches of 64, a second worktree of one commit): compare against that.
 */
import { Effect, Exit, Ref, Scope } from "effect"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import pg from "pg"
import type { RelayQueueService } from "../../src/index.js"
import * as Here from "../../src/index.js"

const parallel = process.argv.includes("--parallel")
const inbox = process.argv.includes("--inbox")
const args = process.argv.slice(2).filter((arg) => arg !== "--parallel" && arg !== "--inbox")
const urlAt = args.indexOf("--url")
const base = urlAt === -1 ? "postgres://postgres@127.0.0.1:5432/postgres" : args[urlAt + 1]!
const [other, blocks = "30", steps = "150", flows = "2000", batch = "1"] = urlAt === -1 ? args : args.filter((_, i) => i !== urlAt && i !== urlAt + 1)
if (other === undefined) throw new Error("usage: npx tsx bench/pg/ab.ts OTHER_CHECKOUT [blocks] [steps] [flows] [--url URL]")
const There = (await import(pathToFileURL(path.resolve(other, "src/index.ts")).href)) as typeof Here

interface Side {
  readonly name: string
  readonly database: string
  readonly step: Effect.Effect<void, unknown>
  readonly wall: Array<number>
  readonly cpu: Array<number>
}

const scope = Effect.runSync(Scope.make())

/** A `settleAndClaim` step (`batch` settles and a claim of `batch`) on a store filled with the backlog, analyzed. */
const exchangeStep = async (lib: typeof Here, url: string): Promise<Effect.Effect<void, unknown>> => {
  const queue: RelayQueueService = await Effect.runPromise(
    Scope.extend(lib.PgRelayQueue.make({ url, maxConnections: 1, policy: { leaseTicks: "60 seconds" }, claims: parallel ? "parallel" : "exact" }), scope)
  )
  const events = (Number(blocks) * Number(steps) + 200) * Number(batch)
  for (let from = 0; from < events; from += 1024) {
    const items = Array.from({ length: Math.min(1024, events - from) }, (_, i) => ({
      eventId: `e${String(from + i).padStart(8, "0")}`,
      flowId: `f${(from + i) % Number(flows)}`,
      body: { n: from + i }
    }))
    await Effect.runPromise(queue.enqueueBatch(items))
  }
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  await client.query("ANALYZE relay_flow")
  await client.query("ANALYZE relay_event")
  await client.end()
  let held: ReadonlyArray<{ readonly token: { readonly eventId: string; readonly generation: number } }> = []
  return Effect.flatMap(
    Effect.suspend(() => queue.settleAndClaim(held.map((c) => ({ token: c.token, reply: { _tag: "Accepted" as const } })), Number(batch))),
    ({ claims }) => (claims.length === 0 ? Effect.dieMessage("idle") : Effect.sync(() => void (held = claims)))
  )
}

/** An inbox receive (the Counter business): the next delivery of each flow in turn. */
const receiveStep = async (lib: typeof Here, url: string): Promise<Effect.Effect<void, unknown>> => {
  const receiver = await Effect.runPromise(
    Scope.extend(Effect.flatMap(Ref.make(10), (max) => lib.PgInbox.make({ url, maxConnections: 1, business: lib.Counter.business(max) })), scope)
  )
  let next = 0
  return Effect.suspend(() => {
    const i = next++
    const delivery = { eventId: `e${i}`, flowId: `f${i % Number(flows)}`, seq: Math.floor(i / Number(flows)) + 1, body: { delta: 1 } }
    return Effect.flatMap(receiver.receive(delivery), (reply) => (reply._tag === "Accepted" ? Effect.void : Effect.dieMessage(`receive answered ${reply._tag}`)))
  })
}

const admin = new pg.Client({ connectionString: base })
await admin.connect()
const sides: Array<Side> = []
try {
  for (const [name, lib] of [[other, There], ["this tree", Here]] as const) {
    const database = `fair_relay_ab_${process.pid}_${sides.length}`
    await admin.query(`CREATE DATABASE ${database}`)
    const url = base.replace(/\/[^/]*$/, `/${database}`)
    const step = inbox ? await receiveStep(lib, url) : await exchangeStep(lib, url)
    await Effect.runPromise(Effect.repeatN(step, 100))
    sides.push({ name, database, step, wall: [], cpu: [] })
  }
  for (let block = 0; block < Number(blocks); block++) {
    for (const side of block % 2 === 0 ? sides : [...sides].reverse()) {
      const cpu = process.cpuUsage()
      const start = performance.now()
      await Effect.runPromise(Effect.repeatN(side.step, Number(steps) - 1))
      side.wall.push((performance.now() - start) / Number(steps))
      const used = process.cpuUsage(cpu)
      side.cpu.push((used.user + used.system) / 1000 / Number(steps))
    }
  }
  const median = (xs: ReadonlyArray<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
  const mean = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0) / xs.length
  for (const side of sides) {
    console.log(
      `${side.name}: wall per step median ${median(side.wall).toFixed(3)} ms, mean ${mean(side.wall).toFixed(3)} ms (${(1000 * Number(batch) / mean(side.wall)).toFixed(0)} events/s); ` +
        `client CPU per step median ${median(side.cpu).toFixed(3)} ms`
    )
  }
  const [there, here] = sides as [Side, Side]
  console.log(`this tree faster in ${here.wall.filter((w, i) => w < there.wall[i]!).length} of ${blocks} blocks; ratio of mean walls ${(mean(there.wall) / mean(here.wall)).toFixed(3)}`)
} finally {
  await Effect.runPromise(Scope.close(scope, Exit.void))
  for (const side of sides) await admin.query(`DROP DATABASE ${side.database} WITH (FORCE)`)
  await admin.end()
}
