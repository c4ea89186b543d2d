/**
 * This tree's PostgreSQL inbox receive against another checkout's, in one process: a fresh
 * database each with the Counter business, then blocks of `per` receives (64 flows, in seq order)
 * taken by each in turn, the order of the pair alternating. Prints each side's median wall and CPU
 * per receive over the blocks. For before/after comparisons on a noisy machine; not part of `npm
 * run bench` (whose PostgreSQL workers answer without an inbox).
 *
 *   git worktree add /tmp/base <commit> && ln -s "$PWD/node_modules" /tmp/base/node_modules
 *   npx tsx bench/pg/inboxAb.ts /tmp/base [blocks 30] [per 200] [--url postgres://…/postgres]
 */
import { Effect, Ref, Scope } from "effect"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import pg from "pg"
const args = process.argv.slice(2)
const urlAt = args.indexOf("--url")
const base = urlAt === -1 ? "postgres://postgres@127.0.0.1:5432/postgres" : args[urlAt + 1]!
const [other, blocksArg = "30", perArg = "200"] = urlAt === -1 ? args : args.filter((_, i) => i !== urlAt && i !== urlAt + 1)
if (other === undefined) throw new Error("usage: npx tsx bench/pg/inboxAb.ts OTHER_CHECKOUT [blocks] [per] [--url URL]")
const Here = await import("../../src/index.js")
const There = (await import(pathToFileURL(path.resolve(other, "src/index.ts")).href)) as typeof Here
const admin = new pg.Client({ connectionString: base })
await admin.connect()
const sides = [] as Array<{ name: string; receive: (i: number) => Effect.Effect<unknown, unknown>; wall: number[]; cpu: number[] }>
for (const [name, lib] of [["base", There], ["this", Here]] as const) {
  const db = `fr_inbox_ab_${name}_${process.pid}`
  await admin.query(`DROP DATABASE IF EXISTS ${db}`); await admin.query(`CREATE DATABASE ${db}`)
  const scope = Effect.runSync(Scope.make())
  const inbox = await Effect.runPromise(Effect.gen(function*() {
    return yield* lib.PgInbox.make({ url: base.replace(/[^/]*$/, db), business: lib.Counter.business(yield* Ref.make(10)) })
  }).pipe(Scope.extend(scope)))
  sides.push({ name, receive: (i) => inbox.receive({ eventId: `e${i}`, flowId: `f${i % 64}`, seq: Math.floor(i / 64) + 1, body: { delta: 1 } }), wall: [], cpu: [] })
}
const blocks = Number(blocksArg)
const per = Number(perArg)
let n = 0
for (let b = 0; b < blocks; b++) {
  const order = b % 2 === 0 ? sides : [...sides].reverse()
  for (const side of order) {
    const start = n
    const cpu = process.cpuUsage(); const t = performance.now()
    await Effect.runPromise(Effect.gen(function*() { for (let i = 0; i < per; i++) yield* side.receive(start + i) }))
    side.wall.push((performance.now() - t) / per); const c = process.cpuUsage(cpu); side.cpu.push((c.user + c.system) / 1000 / per)
  }
  n += per
}
const med = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!
for (const s of sides) console.log(`${s.name}: wall per receive median ${med(s.wall).toFixed(3)} ms, CPU median ${med(s.cpu).toFixed(3)} ms`)
for (const side of sides) await admin.query(`DROP DATABASE IF EXISTS fr_inbox_ab_${side.name}_${process.pid} WITH (FORCE)`)
await admin.end()
process.exit(0)
