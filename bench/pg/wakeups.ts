/**
 * Why a worker's CPU per event grows with the database's distance, for diagnosis; not part of
 * `npm run bench`. Two measures, one after the other:
 *
 * 1. One worker daemon (`Relay.run({ workers: 1, batchSize: 1 })`, a transport that accepts at
 *    once, parallel claims unless `--exact`) draining a backlog over 64 flows of a fresh database
 *    for `--seconds` (default 8), directly and through `bench/pg/latency.mjs` at each `--latency-ms`
 *    (default 0,1,5): first the daemon's CPU with nothing to do (3 s on the empty store), then
 *    events/s and this process's CPU per event while it drains — its main thread (JavaScript, the
 *    event loop) and its other threads (the garbage collector's helpers) apart, from /proc.
 * 2. The same piece of JavaScript (Effect steps and small allocations, no I/O), run back to back
 *    or each after a sleep of 1 or 5 ms: this process's CPU per piece. It does the same work
 *    either way; what a sleep adds is the machine's (a timer, a wake-up, and presumably caches
 *    refilled after the CPU ran something else).
 *
 *   npx tsx bench/pg/wakeups.ts [--seconds 8] [--latency-ms 0,1,5] [--exact] [--url postgres://…/postgres]
 */
import { Deferred, Duration, Effect, Fiber, Logger, LogLevel } from "effect"
import pg from "pg"
import * as PgRelayQueue from "../../src/layers/PgRelayQueue.js"
import * as Relay from "../../src/services/Relay.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import { Transport } from "../../src/services/Transport.js"
import { procCpuMs } from "./procCpu.js"
import { startProxy } from "./proxy.js"

const argument = (name: string) => {
  const at = process.argv.indexOf(name)
  return at === -1 ? undefined : process.argv[at + 1]
}
const seconds = Number(argument("--seconds") ?? 8)
const latencies = (argument("--latency-ms") ?? "0,1,5").split(",").map(Number)
const claims = process.argv.includes("--exact") ? "exact" : "parallel"
const base = argument("--url") ?? "postgres://postgres@127.0.0.1:5432/postgres"
if (!(seconds > 0) || latencies.some((ms) => !(Number.isInteger(ms) && ms >= 0 && ms <= 1000))) {
  console.error("usage: npx tsx bench/pg/wakeups.ts [--seconds N > 0] [--latency-ms 0,1,5 (whole ms, 0–1000)] [--exact] [--url URL]")
  process.exit(2)
}

/** CPU milliseconds of this process's main thread, and of all its threads (user + system). */
const cpu = () => {
  const usage = process.cpuUsage()
  return { main: procCpuMs(`/proc/self/task/${process.pid}/stat`), all: (usage.user + usage.system) / 1000 }
}

/** The daemon on a fresh database at `url`: its CPU with nothing to do, then events/s and CPU per event while draining. */
const daemon = (url: string, backlog: number) =>
  Effect.gen(function*() {
    const queue = yield* PgRelayQueue.make({ url, maxConnections: 2, policy: { leaseTicks: "60 seconds" }, claims })
    let handled = 0
    const drained = yield* Deferred.make<void>()
    const transport = {
      deliver: () =>
        Effect.sync(() => {
          if (++handled === backlog) Deferred.unsafeDone(drained, Effect.void)
          return { _tag: "Accepted" as const }
        })
    }
    const relay = yield* Relay.make.pipe(Effect.provideService(RelayQueue, queue), Effect.provideService(Transport, transport))
    const run = relay.run({ workers: 1, batchSize: 1, metricsInterval: null, pruneInterval: null, deliveryTimeout: Duration.seconds(10) }).pipe(
      Logger.withMinimumLogLevel(LogLevel.Error)
    )
    // Idle: the daemon on the empty store (it polls at its default interval).
    const idling = yield* Effect.fork(run)
    yield* Effect.sleep("500 millis")
    const idleBefore = cpu()
    yield* Effect.sleep("3 seconds")
    const idle = cpu().all - idleBefore.all
    yield* Fiber.interrupt(idling)
    for (let from = 0; from < backlog; from += 1024) {
      yield* queue.enqueueBatch(Array.from({ length: Math.min(1024, backlog - from) }, (_, i) => ({
        eventId: `e${from + i}`,
        flowId: `f${(from + i) % 64}`,
        body: { n: from + i }
      })))
    }
    const [before, started] = [cpu(), performance.now()]
    const working = yield* Effect.fork(run)
    yield* Effect.raceFirst(Deferred.await(drained), Effect.sleep(Duration.seconds(seconds)))
    const [after, wall, events] = [cpu(), performance.now() - started, handled]
    yield* Fiber.interrupt(working)
    return { events, wall, main: after.main - before.main, all: after.all - before.all, idle }
  }).pipe(Effect.scoped)

const admin = new pg.Client({ connectionString: base })
await admin.connect()
console.log(`one worker daemon, ${claims} claims, ${seconds} s per setting (this process's CPU per event: main thread + other threads)`)
for (const latencyMs of latencies) {
  const proxy = latencyMs === 0 ? undefined : await startProxy(base, latencyMs)
  if (typeof proxy === "string") {
    console.error(proxy)
    process.exit(2)
  }
  const database = `fair_relay_wakeups_${process.pid}_${latencyMs}`
  await admin.query(`CREATE DATABASE ${database}`)
  try {
    const url = new URL(proxy?.url ?? base)
    url.pathname = `/${database}`
    // Enough for the time given at the fastest this machine drains (~600 events/s on loopback).
    const backlog = Math.ceil((seconds * 800) / (1 + latencyMs * 4))
    const r = await Effect.runPromise(daemon(url.toString(), backlog))
    const per = (ms: number) => (ms / r.events).toFixed(2)
    console.log(
      `  ${latencyMs === 0 ? "loopback" : `${latencyMs} ms each way`}: ${r.events} events, ${(r.events / (r.wall / 1000)).toFixed(0)}/s, ` +
        `CPU ${per(r.all)} ms/event (main thread ${per(r.main)}, other threads ${per(r.all - r.main)}); idle daemon ${(r.idle / 30).toFixed(2)} % of a CPU`
    )
  } finally {
    await admin.query(`DROP DATABASE ${database} WITH (FORCE)`)
    proxy?.process.kill()
  }
}
await admin.end()

// 2. The same work back to back, or after a sleep.
const piece = Effect.gen(function*() {
  let sum = 0
  for (let i = 0; i < 300; i++) sum += yield* Effect.map(Effect.succeed(i), (x) => ({ x, text: String(x) }).x)
  return sum
})
const pieces = async (sleepMs: number, n: number) => {
  const before = process.cpuUsage()
  for (let i = 0; i < n; i++) {
    Effect.runSync(piece)
    if (sleepMs > 0) await new Promise((resolve) => setTimeout(resolve, sleepMs))
  }
  const used = process.cpuUsage(before)
  return (used.user + used.system) / n
}
for (let i = 0; i < 2000; i++) Effect.runSync(piece)
console.log("the same piece of JavaScript (no I/O), CPU µs per piece:")
for (let round = 1; round <= 2; round++) {
  const [hot, one, five] = [await pieces(0, 3000), await pieces(1, 1000), await pieces(5, 400)]
  console.log(`  round ${round}: back to back ${hot.toFixed(0)}, after 1 ms asleep ${one.toFixed(0)}, after 5 ms asleep ${five.toFixed(0)}`)
}
