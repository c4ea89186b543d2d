/**
 * Effect runtime steps and fibers per queue operation on SQLite — a count, not a timing: the same
 * code counts the same on any machine, where CPU figures on a shared VM move by a third between
 * runs. Each step is one turn of a fiber's run loop (`Supervisor.onEffect` under the
 * `OpSupervision` runtime flag), the unit of the runtime's own cost. For diagnosis and before /
 * after comparisons; not part of `npm run bench`:
 *
 *   npx tsx bench/ops.ts [count] [--pg URL [--parallel]] [--sites N]
 *
 * Counts `count` (default 500) of each operation after as many of warm-up, on a file store
 * (synchronous NORMAL: the count does not depend on it), the Counter receiver in its own file (and
 * once more with a second inbox whose business has only `apply`, a savepoint per delivery) —
 * or, with `--pg`, on PostgreSQL at URL (an empty database: the queue's and the inbox's tables are
 * made there; exact claims unless `--parallel`). With `--sites N`, also the daemon event's N
 * commonest steps by site: the instruction and the function it runs (a continuation, a `sync`
 * body, a generator's factory), named by its opening text.
 */
import { Effect, Fiber, Layer, Logger, LogLevel, Ref, RuntimeFlags, RuntimeFlagsPatch, Supervisor } from "effect"
import { Counter, Inbox, PgInbox, PgRelayQueue, Relay, RelayQueue, SqliteInbox, SqliteRelayQueue, TickClock, Transport } from "../src/index.js"
import pg from "pg"
import { freshWorkFile, removeDb } from "./stores.js"

/** The run loop's view of a step: its instruction and what it holds. */
interface Primitive {
  readonly _op: string
  readonly effect_instruction_i0?: unknown
  readonly effect_instruction_i1?: unknown
  readonly commit?: unknown
}

const sites = new WeakMap<object, string>()
/** A function by its name and opening text (once per function object). */
const textOf = (f: unknown): string => {
  if (typeof f !== "function") return ""
  let text = sites.get(f)
  if (text === undefined) {
    text = `${f.name ? `${f.name} ` : ""}${f.toString().replace(/\s+/g, " ").slice(0, 100)}`
    sites.set(f, text)
  }
  return text
}
/** A step's site: its instruction and, where it runs a function, that function (a continuation's frame: what it continues with). */
const siteOf = (step: Primitive): string => {
  const { _op: op } = step
  if (op === "OnSuccess" || op === "OnFailure" || op === "OnSuccessAndFailure") return `${op} ${textOf(step.effect_instruction_i1)}`
  if (op === "Commit" && typeof step.effect_instruction_i0 !== "function") return `Commit ${textOf(step.commit)}`
  return `${op} ${textOf(step.effect_instruction_i0)}`
}

/** Counts run-loop steps and fiber starts while installed; by site too while `bySite` is set. */
class StepCounter extends Supervisor.AbstractSupervisor<void> {
  steps = 0
  fibers = 0
  bySite: Map<string, number> | undefined
  readonly value = Effect.void
  override onStart() {
    this.fibers++
  }
  override onEffect(_fiber: unknown, effect: unknown) {
    this.steps++
    if (this.bySite !== undefined) {
      const site = siteOf(effect as Primitive)
      this.bySite.set(site, (this.bySite.get(site) ?? 0) + 1)
    }
  }
}

const args = process.argv.slice(2)
const count = Number(args.find((arg, i) => !arg.startsWith("--") && args[i - 1] !== "--pg" && args[i - 1] !== "--sites") ?? 500)
const pgUrl = args.includes("--pg") ? args[args.indexOf("--pg") + 1] : undefined
const topSites = args.includes("--sites") ? Number(args[args.indexOf("--sites") + 1]) : 0
const queueFile = freshWorkFile("ops.queue.db")
const inboxFile = freshWorkFile("ops.inbox.db")
const applyOnlyFile = freshWorkFile("ops.apply-only.db")

const policy = { leaseTicks: 60_000 }
const stores = Layer.mergeAll(
  pgUrl === undefined
    ? SqliteRelayQueue.layer({ filename: queueFile, synchronous: "normal", policy })
    : PgRelayQueue.layer({ url: pgUrl, policy, claims: args.includes("--parallel") ? "parallel" : "exact" }),
  Layer.unwrapEffect(
    Effect.map(Ref.make(1_000), (maxDelta) =>
      pgUrl === undefined
        ? SqliteInbox.layer({ filename: inboxFile, synchronous: "normal", business: Counter.business(maxDelta) })
        : PgInbox.layer({ url: pgUrl, business: Counter.business(maxDelta) }))
  )
)
const live = Relay.layer.pipe(Layer.provideMerge(Transport.layerInbox), Layer.provideMerge(stores), Layer.orDie)

/**
 * A second inbox whose business has only `apply` (the Counter's, without `applyBatch`): each
 * delivery's step runs in a savepoint of its own. Its own file, or its own schema on PostgreSQL.
 */
const applyOnly = Effect.flatMap(Ref.make(1_000), (maxDelta) => {
  const business = { ...Counter.business(maxDelta), applyBatch: undefined }
  if (pgUrl === undefined) return SqliteInbox.make({ filename: applyOnlyFile, synchronous: "normal", business })
  const url = new URL(pgUrl)
  url.searchParams.set("options", "-c search_path=ops_apply_only")
  return Effect.zipRight(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: pgUrl })
      await client.connect()
      await client.query("CREATE SCHEMA ops_apply_only")
      await client.end()
    }),
    PgInbox.make({ url: url.toString(), business })
  )
})

const counter = new StepCounter()
/** `effect` with every step of it, and of the fibers it starts, counted. */
const supervised = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(Effect.supervised(counter), Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision)))
/** Runs `effect` counted and prints the counts per `per`; answers its value. */
const counted = <A, E, R>(name: string, per: number, effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const [steps, fibers] = [counter.steps, counter.fibers]
    const value = yield* supervised(effect)
    console.log(`${name.padEnd(44)} ${((counter.steps - steps) / per).toFixed(1).padStart(7)} steps  ${((counter.fibers - fibers) / per).toFixed(2)} fibers`)
    return value
  })

const events = (prefix: string, n: number) =>
  Array.from({ length: n }, (_, i) => ({ eventId: `${prefix}-${i}`, flowId: `${prefix}-flow-${i}`, body: { delta: 1 } }))

const deliveryOf = (claimed: { readonly event: { readonly eventId: string; readonly flowId: string; readonly seq: number; readonly body: unknown } }) => ({
  eventId: claimed.event.eventId,
  flowId: claimed.event.flowId,
  seq: claimed.event.seq,
  body: claimed.event.body
})

const program = Effect.gen(function*() {
  const queue = yield* RelayQueue
  const inbox = yield* Inbox
  const relay = yield* Relay
  // Warm-up: every operation below, as often, so the counts are of code the JIT has settled.
  yield* queue.enqueueBatch(events("warm", count))
  for (let i = 0; i < count; i++) yield* relay.step

  console.log(`per operation, ${count} of each (after as many of warm-up):`)
  yield* counted("RelayQueue.enqueue", count, Effect.forEach(events("e", count), (input) => queue.enqueue(input), { discard: true }))
  const claims = yield* counted("RelayQueue.claim", count, Effect.forEach(events("e", count), () => queue.claim))
  const taken = claims.flatMap((claim) => (claim._tag === "Claimed" ? [claim] : []))
  const replies = yield* counted("Inbox.receive", count, Effect.forEach(taken, (claimed) => inbox.receive(deliveryOf(claimed))))
  const plain = yield* applyOnly
  yield* Effect.forEach(taken, (claimed) => plain.receive({ ...deliveryOf(claimed), eventId: `warm-${claimed.event.eventId}`, flowId: `warm-${claimed.event.flowId}` }), { discard: true })
  yield* counted("Inbox.receive (apply only: a savepoint each)", count, Effect.forEach(taken, (claimed) => plain.receive(deliveryOf(claimed)), { discard: true }))
  yield* counted("RelayQueue.settle", count, Effect.forEach(taken, (claimed, i) => queue.settle(claimed.token, replies[i]!), { discard: true }))
  yield* queue.enqueueBatch(events("s", count))
  yield* counted("Relay.step (claim, receive, settle)", count, Effect.repeatN(relay.step, count - 1))
  // What a daemon worker's turn is made of: one delivery through the transport (a worker holding
  // one head uses `deliver`, several `deliverBatch`), and one settleAndClaim trading its reply for the next head.
  yield* queue.enqueueBatch(events("x", count + 1))
  const first = yield* queue.claim
  if (first._tag !== "Claimed") return yield* Effect.dieMessage("nothing to claim")
  const transport = yield* Transport
  yield* counted(
    "Transport.deliver",
    count,
    Effect.forEach(events("x", count), (_, i) =>
      transport.deliver(deliveryOf({ event: { eventId: `a-${i}`, flowId: `a-flow-${i}`, seq: 1, body: { delta: 1 } } })))
  )
  const held = yield* counted(
    "Transport.deliverBatch (1 delivery)",
    count,
    Effect.forEach(events("x", count), (_, i) =>
      transport.deliverBatch!([deliveryOf({ event: { eventId: `b-${i}`, flowId: `b-flow-${i}`, seq: 1, body: { delta: 1 } } })]))
  )
  if (held.length !== count) return yield* Effect.dieMessage("a delivery was lost")
  yield* counted(
    "RelayQueue.settleAndClaim (1 settle, 1 claim)",
    count,
    Effect.gen(function*() {
      let token = first.token
      for (let i = 0; i < count; i++) {
        const { claims } = yield* queue.settleAndClaim([{ token, reply: { _tag: "Accepted" } }], 1)
        if (claims[0] === undefined) return yield* Effect.dieMessage("nothing to claim")
        token = claims[0].token
      }
    })
  )
})

/** The worker daemon's default (one worker) over `count` events, per event: its fibers counted, the wait for them not. */
const daemon = Effect.gen(function*() {
  const queue = yield* RelayQueue
  const relay = yield* Relay
  yield* queue.enqueueBatch(events("d", count))
  const target = (yield* queue.stats).byState.acked + count
  const [steps, fibers] = [counter.steps, counter.fibers]
  if (topSites > 0) counter.bySite = new Map()
  const running = yield* Effect.fork(supervised(relay.run({ metricsInterval: null, pruneInterval: null })))
  while ((yield* queue.stats).byState.acked < target) yield* Effect.sleep("2 millis")
  const [stepsEach, fibersEach] = [(counter.steps - steps) / count, (counter.fibers - fibers) / count]
  const bySite = counter.bySite
  counter.bySite = undefined
  yield* Fiber.interrupt(running)
  console.log(`${"relay.run({ workers: 1 }), per event".padEnd(44)} ${stepsEach.toFixed(1).padStart(7)} steps  ${fibersEach.toFixed(2)} fibers`)
  if (bySite !== undefined) {
    console.log(`its ${topSites} commonest steps by site, per event:`)
    for (const [site, n] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, topSites)) {
      console.log(`${(n / count).toFixed(2).padStart(7)}  ${site}`)
    }
  }
}).pipe(Logger.withMinimumLogLevel(LogLevel.Warning))

await Effect.runPromise(Effect.zipRight(program.pipe(TickClock.at(0), Effect.scoped), daemon).pipe(Effect.provide(live)))
removeDb(queueFile)
removeDb(inboxFile)
removeDb(applyOnlyFile)
