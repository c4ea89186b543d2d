/**
 * Where a PostgreSQL step's time goes, for diagnosis; not part of `npm run bench`. Fills a fresh
 * database with `events` over 64 flows (`--flows N`; with `--groups G`, flow k in group k mod G), then runs `steps` claim → settle pairs (or `claimBatch` →
 * `settleBatch` of `batch`; with `--exchange`, as the worker daemon does: one `settleAndClaim` per
 * step, settling what the step before claimed; with `--analyze`, after an ANALYZE of the filled store; with
 * `--analyze-written`, of its flow and event tables only, as autovacuum leaves a store that has no groups) on one connection and prints, per step: wall time,
 * this process's CPU, the server backends' CPU, and the statements sent (by text, most frequent first).
 *
 *   npx tsx bench/pg/profile.ts [--parallel] [--exchange] [--batch N] [--steps N] [--analyze] [--url postgres://…/db] [--cpu-profile FILE]
 *   npx tsx bench/pg/profile.ts --floor 5|3|2 …   the same steps by the floor (bench/pg/floor.ts) instead of the library
 *   npx tsx bench/pg/profile.ts --unnamed …   the store opened with `preparedStatements: false` (every statement parsed where it runs)
 *   npx tsx bench/pg/profile.ts --daemon …   a step is a delivery of `relay.run({ workers: 1, batchSize })` (the worker
 *     daemon as `npm run bench -- --pg` runs it: a transport that answers `Accepted` at once), counted from
 *     its 51st delivery (`--phases` does not apply)
 *   npx tsx bench/pg/profile.ts --exchange --phases …   also this process's CPU per step between its round trips:
 *     from the step's start to its first batch, each batch from sending to its ReadyForQuery (serializing,
 *     the socket, parsing the answer, and whatever else ran meanwhile: GC), between batches (our code
 *     deciding and building statements), and from the last answer to the step's end (one `getrusage`
 *     per boundary: the figures include that)
 *   (--cpu-profile: a CPU profile of the counted steps alone; summarize it with bench/profile.ts --summarize)
 *   (--allocations: the bytes the counted steps allocate per step, freed ones included, and the
 *   sites that allocate most — the collector's work; every run also prints the CPU of this
 *   process's helper threads, V8's collector and compiler among them, per step)
 *   (--promoted: the same, of only what outlived the young generation's collections — promoted
 *   to the old one, the full collector's work)
 *   (--callgrind: under valgrind's callgrind, its counters zeroed as the counted steps start and
 *   dumped as they end — `bench/instructions.sh --pg` runs it so: this process's instructions per
 *   step, a figure that holds still where the CPU times of this VM move by a third)
 *   node --import tsx --cpu-prof --cpu-prof-dir bench/.cache/profile bench/pg/profile.ts …
 */
import { Duration, Effect, Exit, Fiber, Logger, LogLevel, Scope } from "effect"
import { execFileSync } from "node:child_process"
import pg from "pg"
import * as PgRelayQueue from "../../src/layers/PgRelayQueue.js"
import * as Relay from "../../src/services/Relay.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import { Transport } from "../../src/services/Transport.js"
import { allocationLines, startAllocationProfile, startCpuProfile } from "../cpuProfile.js"
import { floorWorker } from "./floor.js"
import { helperThreadsCpuMs, procCpuMs } from "./procCpu.js"

const argument = (name: string) => {
  const at = process.argv.indexOf(name)
  return at === -1 ? undefined : process.argv[at + 1]
}
const parallel = process.argv.includes("--parallel")
const exchange = process.argv.includes("--exchange")
const daemon = process.argv.includes("--daemon")
const batch = Number(argument("--batch") ?? 1)
const steps = Number(argument("--steps") ?? 2000)
const cpuProfile = argument("--cpu-profile")
const callgrind = process.argv.includes("--callgrind")
const callgrindControl = (flag: "--zero" | "--dump") => execFileSync("callgrind_control", [flag, String(process.pid)], { stdio: "ignore" })
const phases = process.argv.includes("--phases")
const promoted = process.argv.includes("--promoted")
const allocations = process.argv.includes("--allocations") || promoted
const unnamed = process.argv.includes("--unnamed")
const flows = Number(argument("--flows") ?? 64)
const groups = Number(argument("--groups") ?? 0)
const base = argument("--url") ?? "postgres://postgres@127.0.0.1:5432/postgres"
const database = `fair_relay_profile_${process.pid}`

// Statements sent while counting, by text: how many, and the milliseconds from sending each to its answer.
const texts = new Map<string, { count: number; ms: number }>()
let counting = false

// With --phases: this process's CPU (µs) at each boundary of the current step, and the sums per phase.
let marks: Array<readonly [string, number, number]> = []
let batches = 0
const phaseSums = new Map<string, { cpu: number; wall: number }>()
const cpuNow = () => {
  const { system, user } = process.cpuUsage()
  return user + system
}
const mark = (name: string) => {
  if (counting && phases) marks.push([name, cpuNow(), performance.now()])
}
const startStep = () => {
  batches = 0
  marks = []
  mark("start")
}
const endStep = () => {
  mark("end")
  for (let i = 1; i < marks.length; i++) {
    const key = `${marks[i - 1]![0]} → ${marks[i]![0]}`
    const sum = phaseSums.get(key) ?? { cpu: 0, wall: 0 }
    phaseSums.set(key, sum)
    sum.cpu += marks[i]![1] - marks[i - 1]![1]
    sum.wall += (marks[i]![2] - marks[i - 1]![2]) * 1000
  }
}
// A statement's text on one line, shortened; kept per text, so that counting costs the steps little.
const shortTexts = new Map<string, string>()
const short = (text: string, length: number) => {
  let line = shortTexts.get(text)
  if (line === undefined) shortTexts.set(text, line = text.replace(/\s+/g, " "))
  return line.slice(0, length)
}
/** A statement of a batch: its text, and its prepared statement's name (the same string every time). */
interface Sent {
  readonly text: string
  readonly name?: string | undefined
}
// A batch's line, found by the names of its statements: a statement's text is built afresh for
// every step, and a `Map` keyed by it hashed all of it — some 48,000 instructions a step counted
// by `bench/instructions.sh --pg` as the library's (`String::ComputeAndSetRawHash`).
const batchLines: Array<{ readonly names: ReadonlyArray<string>; readonly line: string }> = []
const batchText = (statements: ReadonlyArray<Sent>): string => {
  const named = statements.every((s) => s.name !== undefined)
  if (named) {
    for (const known of batchLines) {
      if (known.names.length === statements.length && known.names.every((name, i) => name === statements[i]!.name)) return known.line
    }
  }
  const line = statements.map((s) => short(s.text, 40)).join(" | ")
  if (named && batchLines.length < 100) batchLines.push({ names: statements.map((s) => s.name!), line })
  return line
}
const query = pg.Client.prototype.query
pg.Client.prototype.query = function(this: pg.Client, ...args: Array<unknown>) {
  const callback = args[args.length - 1]
  const first = args[0] as { readonly submit?: unknown; readonly text?: string }
  if (counting && typeof first.submit === "function") {
    // A batch of ours (statements in one round trip): counted by what it carries, its time not measured.
    const statements = (first as { readonly statements?: ReadonlyArray<Sent> }).statements ?? []
    const text = batchText(statements)
    const entry = texts.get(text) ?? { count: 0, ms: 0 }
    texts.set(text, entry)
    entry.count++
    const sent = ++batches
    mark(`batch ${sent} sent`)
    const submittable = first as { handleReadyForQuery: (...args: Array<unknown>) => unknown }
    const ready = submittable.handleReadyForQuery
    submittable.handleReadyForQuery = function(this: unknown, ...args: Array<unknown>) {
      mark(`batch ${sent} answered`)
      return ready.apply(this, args)
    }
  } else if (counting && typeof callback === "function") {
    const first = args[0] as string | { readonly text?: string }
    const text = short(typeof first === "string" ? first : first.text ?? "?", 110)
    const entry = texts.get(text) ?? { count: 0, ms: 0 }
    texts.set(text, entry)
    entry.count++
    const sent = performance.now()
    args[args.length - 1] = (...results: Array<unknown>) => {
      entry.ms += performance.now() - sent
      return (callback as (...results: Array<unknown>) => unknown)(...results)
    }
  }
  return (query as (...args: Array<unknown>) => unknown).apply(this, args)
} as unknown as typeof query

/** CPU milliseconds of the server's backends of this database (from /proc; the server is local). */
const admin = new pg.Client({ connectionString: base })
const serverCpuMs = async () => {
  const { rows } = await admin.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE datname = $1", [database])
  let ms = 0
  for (const { pid } of rows) {
    try {
      ms += procCpuMs(`/proc/${pid}/stat`)
    } catch {
      // gone
    }
  }
  return ms
}

await admin.connect()
await admin.query(`CREATE DATABASE ${database}`)
const url = base.replace(/\/[^/]*$/, `/${database}`)

/** The server's WAL position in bytes: what the counted steps wrote to it (nothing else writes meanwhile). */
const walBytes = async () => Number((await admin.query<{ lsn: string }>("SELECT pg_current_wal_lsn() - '0/0' AS lsn")).rows[0]!.lsn)
/** Steps run before the counted ones (a daemon's from the worker's start on). */
const warmupSteps = 51
/** A backend reports its table counts to the statistics once idle for a second: waits for that. */
const statsReported = () => new Promise((resolve) => setTimeout(resolve, 1100))
/**
 * Rows updated per table, and how many of them in place (HOT: no index changed, so no index entry
 * written), as reported by now (`statsReported`).
 */
const updates = async () => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows } = await client.query<{ relname: string; upd: string; hot: string }>(
      "SELECT relname, n_tup_upd AS upd, n_tup_hot_upd AS hot FROM pg_stat_user_tables WHERE n_tup_upd > 0 ORDER BY relname"
    )
    return new Map(rows.map((row) => [row.relname, { updated: Number(row.upd), hot: Number(row.hot) }]))
  } finally {
    await client.end()
  }
}
const scope = Effect.runSync(Scope.make())
try {
  const queue = await Effect.runPromise(
    Scope.extend(PgRelayQueue.make({ url, maxConnections: 1, policy: { leaseTicks: "60 seconds" }, claims: parallel ? "parallel" : "exact", preparedStatements: !unnamed }), scope)
  )
  // Enough for the warm-up and every step to claim a full batch.
  const events = Math.max((steps + 60) * batch, 4096)
  for (let from = 0; from < events; from += 1024) {
    const items = Array.from({ length: Math.min(1024, events - from) }, (_, i) => ({
      eventId: `e${String(from + i).padStart(8, "0")}`,
      flowId: `f${(from + i) % flows}`,
      body: { n: from + i },
      ...(groups > 0 ? { group: `g${((from + i) % flows) % groups}` } : {})
    }))
    await Effect.runPromise(queue.enqueueBatch(items))
  }
  const analyze = process.argv.includes("--analyze") ? ["ANALYZE"] : process.argv.includes("--analyze-written") ? ["ANALYZE relay_flow", "ANALYZE relay_event"] : []
  if (analyze.length > 0) {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    for (const statement of analyze) await client.query(statement)
    await client.end()
  }
  let held: ReadonlyArray<{ readonly token: { readonly eventId: string; readonly generation: number } }> = []
  const floorRounds = argument("--floor")
  const floorClient = floorRounds === undefined
    ? undefined
    : new pg.Client({ connectionString: url, pipeline: true } as pg.ClientConfig)
  await floorClient?.connect()
  const floor = floorClient === undefined ? undefined : floorWorker(floorClient, { rounds: floorRounds === "3" ? 3 : floorRounds === "2" ? 2 : 5, leaseMs: 60_000 })
  const step = floor !== undefined
    ? Effect.flatMap(Effect.promise(() => floor.step()), (claimed) => (claimed === undefined ? Effect.dieMessage("idle") : Effect.void))
    : exchange
    ? Effect.flatMap(
      Effect.suspend(() => queue.settleAndClaim(held.map((c) => ({ token: c.token, reply: { _tag: "Accepted" as const } })), batch)),
      ({ claims }) => (claims.length === 0 ? Effect.dieMessage("idle") : Effect.sync(() => void (held = claims)))
    )
    : batch === 1
    ? Effect.flatMap(queue.claim, (outcome) =>
      outcome._tag === "Claimed" ? Effect.asVoid(queue.settle(outcome.token, { _tag: "Accepted" })) : Effect.dieMessage("idle"))
    : Effect.flatMap(queue.claimBatch(batch), (claims) =>
      Effect.asVoid(queue.settleBatch(claims.map((c) => ({ token: c.token, reply: { _tag: "Accepted" as const } })))))
  // With --daemon, the worker runs from the warm-up on, and a step is a delivery.
  let delivered = 0
  let waiting: { readonly at: number; readonly done: () => void } | undefined
  const deliveries = (n: number) => new Promise<void>((done) => void (waiting = { at: delivered + n, done }))
  const relay = daemon
    ? await Effect.runPromise(Relay.make.pipe(
      Effect.provideService(RelayQueue, queue),
      Effect.provideService(Transport, {
        deliver: () =>
          Effect.sync(() => {
            delivered++
            if (waiting !== undefined && delivered >= waiting.at) waiting.done()
            return { _tag: "Accepted" as const }
          })
      })
    ))
    : undefined
  // Updates are counted from here, the warm-up's too (the fill's counts reported by now).
  await statsReported()
  const updatesBefore = await updates()
  const worker = relay === undefined ? undefined : Effect.runFork(
    relay.run({ workers: 1, batchSize: batch, pollInterval: Duration.millis(10), deliveryTimeout: Duration.seconds(10), metricsInterval: null, pruneInterval: null })
      .pipe(Logger.withMinimumLogLevel(LogLevel.Error))
  )
  const runSteps = (n: number) => worker !== undefined ? deliveries(n * batch) : Effect.runPromise(Effect.repeatN(step, n - 1))
  await runSteps(warmupSteps)
  counting = true
  const profiler = cpuProfile === undefined ? undefined : await startCpuProfile()
  const allocationProfiler = allocations ? await startAllocationProfile({ promoted }) : undefined
  const helpers = helperThreadsCpuMs()
  if (callgrind) callgrindControl("--zero")
  const cpu = process.cpuUsage()
  const server = await serverCpuMs()
  const walBefore = await walBytes()
  const start = performance.now()
  const measured = phases ? Effect.zipRight(Effect.sync(startStep), Effect.zipLeft(step, Effect.sync(endStep))) : step
  await (phases ? Effect.runPromise(Effect.repeatN(measured, steps - 1)) : runSteps(steps))
  const wall = performance.now() - start
  if (callgrind) callgrindControl("--dump")
  if (profiler !== undefined) await profiler.stop(cpuProfile!)
  const used = process.cpuUsage(cpu)
  const helpersUsed = helperThreadsCpuMs() - helpers
  const allocated = await allocationProfiler?.stop(steps)
  const serverUsed = (await serverCpuMs()) - server
  const walWritten = (await walBytes()) - walBefore
  counting = false
  if (worker !== undefined) await Effect.runPromise(Fiber.interrupt(worker))
  await statsReported()
  const updatesAfter = await updates()
  const per = (x: number) => (x / steps).toFixed(3)
  await floorClient?.end()
  console.log(`${floor !== undefined ? `floor (${floorRounds} round trips) ` : ""}${parallel ? "parallel" : "exact"}${daemon ? " daemon worker" : exchange ? " settleAndClaim" : ""} batch ${batch}: ${steps} steps, ${((steps * batch) / (wall / 1000)).toFixed(0)} events/s`)
  console.log(`per step: wall ${per(wall)} ms, client CPU ${per((used.user + used.system) / 1000)} ms (system ${per(used.system / 1000)}), server CPU ${per(serverUsed)} ms`)
  console.log(`  of the client's CPU, its helper threads (V8's collector and compiler, libuv): ${per(helpersUsed)} ms`)
  const updated = [...updatesAfter].map(([table, after]) => {
    const before = updatesBefore.get(table) ?? { updated: 0, hot: 0 }
    const n = after.updated - before.updated
    return `${table} ${(n / (steps + warmupSteps)).toFixed(2)} (${n === 0 ? 0 : Math.round((100 * (after.hot - before.hot)) / n)} % in place)`
  })
  console.log(`  WAL ${(walWritten / steps).toFixed(0)} bytes per step; rows updated per step: ${updated.join(", ")}`)
  if (allocated !== undefined) for (const line of allocationLines(allocated, "step")) console.log(line)
  const total = [...texts.values()].reduce((a, b) => a + b.count, 0)
  console.log(`round trips per step: ${(total / steps).toFixed(2)} (count per step, ms per step from send to answer — not measured for our batches —, texts)`)
  for (const [text, { count, ms }] of [...texts].sort((a, b) => b[1].ms - a[1].ms)) {
    console.log(`  ${(count / steps).toFixed(2)}  ${per(ms)}  ${text}`)
  }
  if (phases) {
    console.log("this process's CPU and the wall time per step by phase (µs; a step's batches numbered from 1):")
    for (const [phase, { cpu, wall }] of phaseSums) {
      console.log(`  ${(cpu / steps).toFixed(0).padStart(6)} ${(wall / steps).toFixed(0).padStart(6)}  ${phase}`)
    }
  }
} finally {
  await Effect.runPromise(Scope.close(scope, Exit.void))
  await admin.query(`DROP DATABASE ${database} WITH (FORCE)`)
  await admin.end()
}
