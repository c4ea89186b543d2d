/**
 * `npm run bench -- --pg`: drain throughput on PostgreSQL with 1, 4 and 16 worker processes —
 * fair-relay (single-step and batched) and, in the same run on the same server, pg-boss and
 * graphile-worker in their per-key modes (see bench/README.md, "PostgreSQL: `npm run bench -- --pg`").
 *
 *   npm run bench -- --pg                  full run: 64 flows × 320 = 20,480 jobs per run
 *   npm run bench -- --pg --quick          64 flows × 48 = 3,072 jobs per run
 *   npm run bench -- --pg --pg-url URL     the server (default postgres://postgres@127.0.0.1:5432/postgres)
 *   npm run bench -- --pg --max-seconds N  time budget of one drain (full 15, two rounds; quick 6, one round)
 *   npm run bench -- --pg --warmup-seconds N  each configuration's warm-up at each worker count (full 4, quick 3)
 *   npm run bench -- --pg --out FILE       the JSON (default bench/results/pg-<timestamp>.json)
 *   npm run bench -- --pg --workers 1,16 --kinds fair-relay-batch,pg-boss --idle-ms 10
 *                                          a subset, or one idle sleep for every library (experiments)
 *   npm run bench -- --pg --handler-ms N   every job's handler waits N ms (a timer: a delivery over the
 *                                          network, not CPU) instead of answering at once
 *   npm run bench -- --pg --concurrency C  C jobs in flight per process (RunSpec.concurrency), not 1
 *   npm run bench -- --pg --latency-ms N   every connection (workers' and setup's) through a proxy that holds
 *                                          each chunk N ms each way (bench/pg/latency.mjs, started and stopped
 *                                          here): the database a network hop away
 *
 * Throwaway databases named `fair_relay_bench_<pid>_…` hold everything and are dropped at the end:
 * one template per library with the whole backlog, built once through the library's own batch
 * insert, and for each drain a fresh copy of it (`CREATE DATABASE … TEMPLATE`), dropped after it.
 */
import { execSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import pg from "pg"
import { spawnChild } from "../../scenarios/processes/spawn.js"
import type { Child } from "../../scenarios/processes/spawn.js"
import type { ChildStats, Kind, RunSpec } from "./protocol.js"
import { procCpuMs } from "./procCpu.js"
import { startProxy } from "./proxy.js"
import { adminPool, codeOf, countDone, createStore, endState, isBatched, libraryOf } from "./stores.js"
import type { Library, Workload } from "./stores.js"

const benchDir = fileURLToPath(new URL("../", import.meta.url))
const repoDir = path.join(benchDir, "..")
const childScript = fileURLToPath(new URL("./child.ts", import.meta.url))

const kinds: ReadonlyArray<Kind> = [
  "fair-relay-single",
  "fair-relay-batch",
  "fair-relay-parallel-single",
  "fair-relay-parallel-batch",
  "floor-single",
  "floor-pipelined-single",
  "floor-function-single",
  "pg-boss",
  "graphile-worker"
]

/** One measured drain. */
export interface PgRunResult {
  readonly kind: Kind
  readonly library: Library
  readonly workers: number
  readonly batchSize: number
  readonly order: number
  readonly flows: number
  readonly events: number
  /** Completed (committed as done) when the parent's poll saw the end, or the time budget ran out. */
  readonly drained: number
  readonly complete: boolean
  /** From the first handler call in any worker to the parent's poll that saw `drained`. */
  readonly seconds: number
  readonly eventsPerSecond: number
  /** From `go` (every worker connected and ready) to that poll: includes the library's own start. */
  readonly goToDoneSeconds: number
  readonly goToFirstHandlerMs: number | null
  /** `CREATE DATABASE … TEMPLATE`: the run's fresh copy of the library's backlog. */
  readonly copySeconds: number
  readonly polls: number
  /** CPU of the worker processes (user + system) per drained job. */
  readonly workerCpuMsPerEvent: number
  /**
   * CPU of the PostgreSQL backends serving the workers (user + system from /proc, read just before
   * `stop`; they are opened for the run, so this is their whole life) per drained job.
   */
  readonly serverCpuMsPerEvent: number | null
  /**
   * Statements the worker processes sent (calls of node-postgres's `Client.query`, which all three
   * libraries use; BEGIN and COMMIT count) per drained job: round trips to the server.
   */
  readonly queriesPerEvent: number
  readonly emptyFetches: number
  readonly errors: number
  readonly firstError: string | null
  readonly endState: Record<string, number>
  readonly loadAverage: { readonly start: ReadonlyArray<number>; readonly end: ReadonlyArray<number> }
  readonly children: ReadonlyArray<ChildStats>
}

const r1 = (x: number) => Math.round(x * 10) / 10
const r2 = (x: number) => Math.round(x * 100) / 100
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
const loadavg = () => os.loadavg().map(r1)

const version = (pkg: string) =>
  (JSON.parse(fs.readFileSync(path.join(repoDir, "node_modules", pkg, "package.json"), "utf8")) as { version: string }).version

const git = (command: string) => {
  try {
    return execSync(`git ${command}`, { cwd: repoDir, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()
  } catch {
    return null
  }
}

/**
 * CPU time (ms) of the bench database's backends other than the caller's, from /proc (Linux, same
 * host); null when it cannot be read.
 */
const backendCpuMs = async (admin: pg.Pool): Promise<number | null> => {
  try {
    const { rows } = await admin.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`
    )
    let ms = 0
    for (const { pid } of rows) {
      try {
        ms += procCpuMs(`/proc/${pid}/stat`)
      } catch {
        // The backend has just exited.
      }
    }
    return ms
  } catch {
    return null
  }
}

const describeKind = (kind: Kind, batchSize: number) =>
  kind === "fair-relay-single"
    ? "fair-relay exact, single-step"
    : kind === "fair-relay-batch"
    ? `fair-relay exact, batched (n = ${batchSize})`
    : kind === "fair-relay-parallel-single"
    ? "fair-relay parallel, single-step"
    : kind === "fair-relay-parallel-batch"
    ? `fair-relay parallel, batched (n = ${batchSize})`
    : kind === "floor-single"
    ? "floor: our statements, raw pg, one round trip each (5)"
    : kind === "floor-pipelined-single"
    ? "floor: the same pipelined, 2 round trips (as ours)"
    : kind === "floor-function-single"
    ? "floor: the same as one server function, 1 round trip"
    : kind === "pg-boss"
    ? "pg-boss, key_strict_fifo queue + singletonKey"
    : "graphile-worker, queue_name per flow"

/** Runs the PostgreSQL bench; returns the process exit code. */
export const runPgBench = async (args: ReadonlyArray<string>): Promise<number> => {
  const known = new Set(["--quick", "--out", "--pg-url", "--max-seconds", "--workers", "--kinds", "--idle-ms", "--handler-ms", "--concurrency", "--latency-ms", "--warmup-seconds"])
  for (const arg of args) {
    if (arg.startsWith("--") && !known.has(arg)) {
      console.error(`unknown option ${arg} with --pg; known: --pg ${[...known].join(" ")}`)
      return 2
    }
  }
  const option = (name: string) => {
    const i = args.indexOf(name)
    return i < 0 ? undefined : args[i + 1]
  }
  const quick = args.includes("--quick")
  const mode = quick ? "pg-quick" : "pg-full"
  const list = (name: string) => option(name)?.split(",").map((item) => item.trim()).filter((item) => item !== "")
  const idleOverride = option("--idle-ms") === undefined ? undefined : Number(option("--idle-ms"))
  const handlerMs = Number(option("--handler-ms") ?? 0)
  if (!Number.isInteger(handlerMs) || handlerMs < 0) {
    console.error(`--handler-ms takes a whole number of milliseconds (0 or more), got ${option("--handler-ms")}`)
    return 2
  }
  const concurrency = Number(option("--concurrency") ?? 1)
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 64) {
    console.error(`--concurrency takes a whole number from 1 to 64, got ${option("--concurrency")}`)
    return 2
  }
  const latencyMs = Number(option("--latency-ms") ?? 0)
  if (!Number.isInteger(latencyMs) || latencyMs < 0 || latencyMs > 1000) {
    console.error(`--latency-ms takes a whole number of milliseconds from 0 to 1000, got ${option("--latency-ms")}`)
    return 2
  }
  const warmupSeconds = Number(option("--warmup-seconds") ?? (quick ? 3 : 4))
  if (!Number.isFinite(warmupSeconds) || warmupSeconds < 0 || warmupSeconds > 600) {
    console.error(`--warmup-seconds takes a number of seconds from 0 to 600, got ${option("--warmup-seconds")}`)
    return 2
  }
  const workerCounts = list("--workers")?.map(Number) ?? [1, 4, 16]
  const plan = {
    workload: (quick ? { flows: 64, perFlow: 48 } : { flows: 64, perFlow: 320 }) satisfies Workload,
    workers: workerCounts,
    kinds: (list("--kinds") as ReadonlyArray<Kind> | undefined) ?? kinds,
    batchSize: 64,
    handlerMs,
    concurrency,
    /** Milliseconds each way between every client and the server (a proxy), 0 for none. */
    latencyMs,
    /**
     * How long a worker sleeps after finding nothing to do. fair-relay: `Relay.run`'s default
     * poll interval (1 s) — an empty claim takes the store's lock, so idle workers polling often
     * slow the one that has work. pg-boss and graphile-worker: 10 ms — their empty fetches are
     * transient (pg-boss: a concurrent fetch held or took the free keys' heads; graphile-worker: a
     * concurrent fetch held the free queues' rows), and a long sleep after one only idles a worker.
     */
    idleMs: {
      "fair-relay": idleOverride ?? 1000,
      // Parallel claims: an empty claim locks nothing, and a claim that found every eligible head
      // held already retries at once (it reports a wake-up 1 ms away), so the default poll is fine.
      "fair-relay-parallel": idleOverride ?? 1000,
      "pg-boss": idleOverride ?? 10,
      "graphile-worker": idleOverride ?? 10
    } satisfies Record<Library, number>,
    /**
     * The largest pool of each process, by worker processes: 2; with C jobs in flight per process,
     * C + 1 (graphile-worker warns below C: each job in a statement holds a connection), but no
     * more than keeps the W processes' pools within 90 of the server's 100 connections.
     */
    maxConnectionsPerProcess: Object.fromEntries(
      workerCounts.map((w) => [w, concurrency === 1 ? 2 : Math.max(2, Math.min(concurrency + 1, Math.floor(90 / w)))])
    ) as Record<number, number>,
    maxSecondsPerDrain: Number(option("--max-seconds") ?? (quick ? 6 : 15)),
    /** Full runs measure every cell twice, in two interleaved rounds. */
    rounds: quick ? 1 : 2,
    warmupSeconds,
    pollMs: 50
  }
  for (const kind of plan.kinds) {
    if (!kinds.includes(kind)) {
      console.error(`unknown kind ${kind}; known: ${kinds.join(",")}`)
      return 2
    }
  }
  const total = plan.workload.flows * plan.workload.perFlow
  const directUrl = option("--pg-url") ?? "postgres://postgres@127.0.0.1:5432/postgres"
  const proxy = latencyMs === 0 ? undefined : await startProxy(directUrl, latencyMs)
  if (typeof proxy === "string") {
    console.error(proxy)
    return 2
  }
  const serverUrl = proxy?.url ?? directUrl
  const prefix = `fair_relay_bench_${process.pid}_`
  const urlOf = (database: string) => {
    const u = new URL(serverUrl)
    u.pathname = `/${database}`
    return u.toString()
  }
  /** Every store lives in this schema of its database. */
  const schema = "bench"

  const t0 = performance.now()
  const log = (line: string) => console.log(`[${((performance.now() - t0) / 1000).toFixed(1).padStart(6)}s] ${line}`)
  const timestamp = new Date().toISOString()

  const server = new pg.Client({ connectionString: serverUrl, application_name: "fair-relay-bench-parent" })
  server.on("error", () => {})
  await server.connect().catch((error: unknown) => {
    proxy?.process.kill()
    throw error
  })
  const settings = Object.fromEntries(
    (await server.query<{ name: string; setting: string; unit: string | null }>(
      `SELECT name, setting, unit FROM pg_settings WHERE name IN
        ('server_version', 'synchronous_commit', 'fsync', 'wal_sync_method', 'shared_buffers', 'max_connections',
         'commit_delay', 'full_page_writes', 'wal_level', 'autovacuum', 'autovacuum_naptime')`
    )).rows.map((r) => [r.name, r.unit === null ? r.setting : `${r.setting} (${r.unit})`])
  )
  // Worker processes by the code they run (`codeOf`): a library's drains never share a process
  // with another library's.
  const processes = new Map<string, Array<Child>>()
  const allChildren = () => [...processes.values()].flat()
  let pool: pg.Pool | undefined
  let cleaned = false
  const ours = async () =>
    (await server.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE left(datname, $1) = $2`, [prefix.length, prefix]))
      .rows.map((r) => r.datname)
  const dropDatabase = async (database: string) => {
    // The workers have closed their pools when they answer `stopped`; give the server a moment to
    // see the connections go before FORCE ends whatever is left.
    for (let i = 0; i < 50; i++) {
      const { rows } = await server.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1`, [database])
      if (rows[0]!.n === 0) break
      await sleep(100)
    }
    await server.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch((error: unknown) =>
      console.error(`could not drop database ${database}: ${String(error)}`)
    )
  }
  const cleanup = async () => {
    if (cleaned) return
    cleaned = true
    const children = allChildren()
    for (const child of children) child.end()
    await Promise.race([Promise.all(children.map((child) => child.exit)), sleep(20_000)])
    for (const child of children) child.kill()
    await pool?.end().catch(() => {})
    for (const database of await ours().catch(() => [])) await dropDatabase(database)
    await server.end().catch(() => {})
    proxy?.process.kill()
  }
  const onSignal = () => {
    void cleanup().finally(() => process.exit(130))
  }
  process.once("SIGINT", onSignal)
  process.once("SIGTERM", onSignal)

  try {
    const machine = {
      os: `${os.type()} ${os.release()} (${os.platform()}/${os.arch()})`,
      cpus: { count: os.cpus().length, model: os.cpus()[0]?.model ?? "unknown" },
      memoryMB: Math.round(os.totalmem() / 2 ** 20),
      node: process.version,
      postgres: settings,
      loadAverageAtStart: loadavg()
    }
    const packages = {
      effect: version("effect"),
      "@effect/sql-pg": version("@effect/sql-pg"),
      "pg-boss": version("pg-boss"),
      "graphile-worker": version("graphile-worker"),
      pg: version("pg")
    }
    log(
      `fair-relay PostgreSQL bench (${mode}${plan.handlerMs === 0 ? "" : `, handler ${plan.handlerMs} ms`}${plan.latencyMs === 0 ? "" : `, through a proxy ${plan.latencyMs} ms each way`}, ${plan.concurrency} in flight per process): PostgreSQL ${settings.server_version}, node ${process.version}, ` +
        `${machine.cpus.count}× ${machine.cpus.model}, load ${machine.loadAverageAtStart.join(" ")}; ` +
        `pg-boss ${packages["pg-boss"]}, graphile-worker ${packages["graphile-worker"]}; databases ${prefix}*`
    )

    // Worker processes: started once per library, reused by every run of its kinds (each run uses
    // the first W of them). Not shared between libraries, as a worker daemon runs one library:
    // taking turns in one set of processes, our single-step drains ran at up to twice the CPU per
    // event from one drain to the next (suspects: V8 flushing the bytecode and
    // optimized code of functions idle over a few collections, and the type feedback of the
    // modules they share, `pg`; bench/README.md, "PostgreSQL", worker processes per library).
    const most = Math.max(...plan.workers)
    const codes = [...new Set(plan.kinds.map(codeOf))]
    log(`starting ${most} worker processes for each of ${codes.join(", ")}`)
    for (const code of codes) {
      const children = Array.from({ length: most }, () => spawnChild(childScript))
      processes.set(code, children)
      await Promise.all(children.map((child) => child.expect("hello", 300_000)))
    }
    log(`worker processes up (load ${loadavg().join(" ")})`)

    // One template database per library, with the whole backlog.
    const templates = new Map<Library, { readonly database: string; readonly seconds: number }>()
    for (const library of new Set(plan.kinds.map(libraryOf))) {
      const database = `${prefix}tpl_${library.replace(/-/g, "_")}`
      const started = performance.now()
      await server.query(`CREATE DATABASE ${database}`)
      if (library === "fair-relay" || library === "fair-relay-parallel") {
        const client = new pg.Client({ connectionString: urlOf(database) })
        await client.connect()
        await client.query(`CREATE SCHEMA ${schema}`)
        await client.end()
      }
      await createStore(library, urlOf(database), schema, plan.workload)
      {
        // Planner statistics, as a long-lived database would have them (copied with the template).
        const client = new pg.Client({ connectionString: urlOf(database) })
        await client.connect()
        await client.query("ANALYZE")
        await client.end()
      }
      templates.set(library, { database, seconds: r2((performance.now() - started) / 1000) })
      log(`${library}: ${total} jobs enqueued into template ${database} in ${templates.get(library)!.seconds} s`)
    }
    /** A fresh copy of a template; retried while the template's last connections are closing. */
    const copyOf = async (template: string, database: string) => {
      for (let attempt = 1; ; attempt++) {
        try {
          await server.query(`CREATE DATABASE ${database} TEMPLATE ${template}`)
          return
        } catch (error) {
          if (attempt >= 20) throw error
          await sleep(500)
        }
      }
    }

    let order = 0
    /** One drain: a fresh copy of the library's backlog, the first `workers` processes, a time budget. */
    const drain = async (kind: Kind, workers: number, maxSeconds: number): Promise<PgRunResult> => {
      const library = libraryOf(kind)
      const batchSize = isBatched(kind) ? plan.batchSize : 1
      const database = `${prefix}run${order}`
      const copyStarted = performance.now()
      await copyOf(templates.get(library)!.database, database)
      const copySeconds = (performance.now() - copyStarted) / 1000
      pool = adminPool(urlOf(database))
      // DROP DATABASE … WITH (FORCE) may reach a connection the pool is still closing.
      pool.on("error", () => {})
      const admin = pool
      const spec: RunSpec = {
        kind,
        url: urlOf(database),
        schema,
        batchSize,
        idleMs: plan.idleMs[library],
        maxConnections: plan.maxConnectionsPerProcess[workers]!,
        handlerMs: plan.handlerMs,
        concurrency: plan.concurrency
      }
      const used = processes.get(codeOf(kind))!.slice(0, workers)
      for (const child of used) child.send({ cmd: "prepare", run: spec })
      const answers = await Promise.all(used.map((child) => child.next(120_000)))
      const failed = answers.find((answer) => answer.type !== "ready")
      if (failed !== undefined) throw new Error(`a worker could not prepare ${kind}: ${JSON.stringify(failed)}`)

      const loadStart = loadavg()
      const go = Date.now()
      for (const child of used) child.send({ cmd: "go" })
      let drained = 0
      let polls = 0
      let end = go
      for (;;) {
        drained = await countDone(admin, library, schema, total)
        polls++
        end = Date.now()
        if (drained >= total || end - go > maxSeconds * 1000) break
        await sleep(plan.pollMs)
      }
      const serverCpuMs = await backendCpuMs(admin)
      for (const child of used) child.send({ cmd: "stop" })
      const stopped = (await Promise.all(used.map((child) => child.expect("stopped", 120_000)))) as unknown as Array<
        ChildStats & { readonly type: string }
      >
      const stats: Array<ChildStats> = stopped.map(({ type: _type, ...rest }) => rest)
      const loadEnd = loadavg()
      const firsts = stats.map((s) => s.firstAt).filter((t): t is number => t !== null)
      const first = firsts.length === 0 ? go : Math.min(...firsts)
      const seconds = Math.max(0.001, (end - first) / 1000)
      const state = await endState(admin, library, schema)
      const cpuMs = stats.reduce((sum, s) => sum + s.cpuUserMs + s.cpuSystemMs, 0)
      await admin.end()
      pool = undefined
      await dropDatabase(database)
      return {
        kind,
        library,
        workers,
        batchSize,
        order: order++,
        flows: plan.workload.flows,
        events: total,
        drained,
        complete: drained >= total,
        seconds: r2(seconds),
        eventsPerSecond: r1(drained / seconds),
        goToDoneSeconds: r2((end - go) / 1000),
        goToFirstHandlerMs: firsts.length === 0 ? null : first - go,
        copySeconds: r2(copySeconds),
        polls,
        workerCpuMsPerEvent: r2(cpuMs / Math.max(1, drained)),
        serverCpuMsPerEvent: serverCpuMs === null ? null : r2(serverCpuMs / Math.max(1, drained)),
        queriesPerEvent: r2(stats.reduce((sum, s) => sum + s.queries, 0) / Math.max(1, drained)),
        emptyFetches: stats.reduce((sum, s) => sum + s.empty, 0),
        errors: stats.reduce((sum, s) => sum + s.errors, 0),
        firstError: stats.find((s) => s.firstError !== null)?.firstError ?? null,
        endState: state,
        loadAverage: { start: loadStart, end: loadEnd },
        children: stats
      }
    }

    // Warm-up (not measured): every process runs every configuration briefly, so that no measured
    // drain pays for a process's first use of a library (lazy compilation, JIT, first connections).
    // At every worker count, not only the largest: there sixteen processes share two CPUs, and a
    // single-step process got through some 30 steps in its warm-up — too few for V8 to optimise
    // the code, so the first measured W = 1 drain of a round ran cold (174 events/s, 4.1 ms of
    // worker CPU per event, against 318 and 2.0 ms for the same cell in the next round:
    // pg-2026-12-02T04-51-16-301Z.json). The processes of the smaller counts are the first ones.
    const warmup: Array<{ readonly kind: Kind; readonly workers: number; readonly drained: number; readonly seconds: number; readonly errors: number }> = []
    const warmupCounts = [...plan.workers].sort((a, b) => b - a)
    for (const workers of warmupCounts) {
      for (const kind of plan.kinds) {
        const result = await drain(kind, workers, plan.warmupSeconds)
        warmup.push({ kind, workers, drained: result.drained, seconds: result.seconds, errors: result.errors })
      }
    }
    log(`warm-up done: ${warmup.map((w) => `${w.kind} W=${w.workers} ${w.drained}`).join(", ")} jobs (${plan.warmupSeconds} s each)`)

    const runs: Array<PgRunResult & { readonly round: number }> = []
    for (let round = 1; round <= plan.rounds; round++) {
      for (const [w, workers] of plan.workers.entries()) {
        // Interleaved: at each worker count the configurations run back to back, in an order
        // rotated by one per worker count and per round.
        const rotated = plan.kinds.map((_, k) => plan.kinds[(k + w + round - 1) % plan.kinds.length]!)
        for (const kind of rotated) {
          const result = { round, ...(await drain(kind, workers, plan.maxSecondsPerDrain)) }
          runs.push(result)
          log(
            `R${round} W=${String(workers).padStart(2)} ${describeKind(kind, result.batchSize).padEnd(42)} ` +
            `${result.drained}/${total}${result.complete ? "" : " (time budget)"} in ${result.seconds.toFixed(1)} s = ` +
            `${result.eventsPerSecond.toFixed(0).padStart(5)} events/s; CPU/event ${result.workerCpuMsPerEvent} ms workers + ` +
            `${result.serverCpuMsPerEvent} ms server, ${result.queriesPerEvent} queries/event, ` +
            `empty fetches ${result.emptyFetches}, errors ${result.errors}, load ${result.loadAverage.start[0]}→${result.loadAverage.end[0]}`
          )
        }
      }
    }

    // The headline table and the target: at 16 workers, fair-relay ≥ each of the others.
    // Over the rounds: all jobs drained ÷ all seconds of the drains.
    const cell = (kind: Kind, workers: number) => runs.filter((r) => r.kind === kind && r.workers === workers)
    const rate = (kind: Kind, workers: number) => {
      const cells = cell(kind, workers)
      const seconds = cells.reduce((sum, r) => sum + r.seconds, 0)
      return cells.length === 0 ? NaN : r1(cells.reduce((sum, r) => sum + r.drained, 0) / seconds)
    }
    const table = plan.kinds.map((kind) => ({
      kind,
      what: describeKind(kind, isBatched(kind) ? plan.batchSize : 1),
      eventsPerSecond: Object.fromEntries(plan.workers.map((w) => [w, rate(kind, w)])),
      perRound: Object.fromEntries(plan.workers.map((w) => [w, cell(kind, w).map((r) => r.eventsPerSecond)]))
    }))
    // Issue 13's targets: at every W, each of our modes ≥ each peer, single-step and batched; and
    // parallel claims at the most workers ≥ 3× at one.
    const ours: ReadonlyArray<Kind> = ["fair-relay-single", "fair-relay-batch", "fair-relay-parallel-single", "fair-relay-parallel-batch"]
    const peers: ReadonlyArray<Kind> = ["pg-boss", "graphile-worker"]
    const least = Math.min(...plan.workers)
    const targets = {
      everyW: {
        what: "at every W, fair-relay events/s ≥ pg-boss's and ≥ graphile-worker's (each mode, single-step and batched)",
        rows: ours.flatMap((mine) =>
          peers.map((theirs) => {
            const ratios = Object.fromEntries(plan.workers.map((w) => [w, r2(rate(mine, w) / rate(theirs, w))]))
            return { ours: mine, theirs, ratios, met: Object.values(ratios).every((ratio) => ratio >= 1) }
          })
        )
      },
      scaling: {
        what: `parallel claims at W = ${most} ≥ 3× their W = ${least}`,
        rows: (["fair-relay-parallel-single", "fair-relay-parallel-batch"] as const).map((kind) => {
          const ratio = r2(rate(kind, most) / rate(kind, least))
          return { ours: kind, ratio, met: ratio >= 3 }
        })
      }
    }

    const pools = plan.workers.map((w) => `${plan.maxConnectionsPerProcess[w]} at W = ${w}`).join(", ")
    const configuration = {
      common: {
        workload: `${plan.workload.flows} flows × ${plan.workload.perFlow} jobs = ${total}, enqueued round robin over the flows ` +
          "into a template database per library (the library's own batch insert); each drain runs on a fresh CREATE DATABASE … TEMPLATE copy",
        drain: `until every job is completed or ${plan.maxSecondsPerDrain} s after go; events/s = completed ÷ (first handler call → the count that saw them)`,
        rounds: `${plan.rounds}; a cell's figure is Σ completed ÷ Σ seconds over the rounds`,
        workerProcesses: `the first W of a set of ${Math.max(...plan.workers)} long-lived child processes (node --import tsx) ` +
          "of the library's own (fair-relay's both modes, the floor, pg-boss, graphile-worker: a set each), " +
          (plan.concurrency === 1 ? "one job in flight each" : `${plan.concurrency} jobs in flight each (batched kinds: one worker)`),
        handler: plan.handlerMs === 0
          ? "no-op (fair-relay: a Transport whose deliver answers Accepted without I/O)"
          : `waits ${plan.handlerMs} ms (a timer), then answers (fair-relay: a Transport whose deliver answers Accepted after Effect.sleep; ` +
            "a batch's deliveries run concurrently, as Relay.run delivers a batch; pg-boss, graphile-worker and the floor: one job per fetch)",
        idleMs: plan.idleMs,
        maxConnectionsPerProcess: plan.maxConnectionsPerProcess,
        timing: "first handler call in any worker → the parent's count query (every 50 ms) sees every job completed",
        warmup: `before the measured drains, each configuration runs for ${plan.warmupSeconds} s at every worker count (${warmupCounts.join(", ")} processes; not measured)`
      },
      "fair-relay": {
        store: "PgRelayQueue (per-store advisory transaction lock on every write), policy { leaseTicks: 60 s }",
        run: `Relay.run({ workers: ${plan.concurrency} (batched: 1), batchSize: 1 | ${plan.batchSize}, pollInterval: ${plan.idleMs["fair-relay"]} ms, deliveryTimeout: 10 s, metricsInterval: null })`,
        ordering: "per-flow order (one inflight head per flow), fair turns across flows by (served, flow_id)"
      },
      "pg-boss": {
        version: packages["pg-boss"],
        queue: `createQueue("bench", { policy: "key_strict_fifo" }), every job inserted with singletonKey = flow id`,
        worker: `${plan.concurrency} loop(s): fetch("bench", { batchSize: 1 }) → handler → complete("bench", jobs) (fenced to the fetched attempt); empty fetch → sleep ${plan.idleMs["pg-boss"]} ms`,
        options: `{ max: ${pools}, migrate: false, supervise: false, schedule: false, registerInstance: false }`,
        ordering: "FIFO per singletonKey: a fetch takes only each key's head (oldest (created_on, id) of its created/retry jobs), and none of a key " +
          "whose job is active, in retry or failed (unique index job_i8); among the heads, oldest (priority, created_on) first. A failed job " +
          "is retried after retryDelay and after retryLimit is left failed, holding its key's later jobs back until it is dealt with; no cross-key fairness"
      },
      "graphile-worker": {
        version: packages["graphile-worker"],
        jobs: "addJobs with queueName = flow id (a named queue runs its jobs one at a time), runAt = enqueue order",
        worker: `run({ concurrency: ${plan.concurrency}, pollInterval: ${plan.idleMs["graphile-worker"]}, pgPool (max ${pools}), noHandleSignals: true, taskList: { noop } }); no localQueue, no completeJobBatchDelay`,
        ordering: "one job at a time per queue, oldest run_at first; a failed job is rescheduled with backoff and the queue's later jobs run before it; no cross-queue fairness (global run_at order)"
      }
    }

    const results = {
      command: `npm run bench -- --pg${args.length > 0 ? ` ${args.join(" ")}` : ""}`,
      mode,
      timestamp,
      durationSeconds: r1((performance.now() - t0) / 1000),
      machine: { ...machine, loadAverageAtEnd: loadavg() },
      source: { commit: git("rev-parse HEAD"), dirtySrc: (git("status --porcelain -- :/src") ?? "") !== "" },
      packages,
      databases: { prefix, templates: Object.fromEntries(templates) },
      plan,
      configuration,
      table,
      targets,
      warmup,
      runs
    }
    const resultsDir = path.join(benchDir, "results")
    fs.mkdirSync(resultsDir, { recursive: true })
    const named = `pg${plan.latencyMs === 0 ? "" : `-latency-${plan.latencyMs}ms`}${plan.concurrency === 1 ? "" : `-c${plan.concurrency}`}${plan.handlerMs === 0 ? "" : `-handler-${plan.handlerMs}ms`}`
    const out = option("--out") ?? path.join(resultsDir, `${named}-${timestamp.replace(/[:.]/g, "-")}.json`)
    fs.writeFileSync(out, JSON.stringify(results, null, 2) + "\n")

    const handled = `${plan.handlerMs === 0 ? "no-op handler" : `handler ${plan.handlerMs} ms`}, ${plan.concurrency} in flight per process` +
      (plan.latencyMs === 0 ? "" : `, the server ${plan.latencyMs} ms away each way`)
    log(`events/s (${total} jobs, ${plan.workload.flows} flows, ${handled}; W = worker processes):`)
    log(`  ${"".padEnd(44)}${plan.workers.map((w) => `W=${w}`.padStart(9)).join("")}`)
    for (const row of table) {
      log(`  ${row.what.padEnd(44)}${plan.workers.map((w) => (row.eventsPerSecond[w] ?? NaN).toFixed(0).padStart(9)).join("")}`)
    }
    log(`wrote ${path.relative(process.cwd(), out)}`)
    const complete = plan.workers.length > 1 && plan.kinds.length === kinds.length
    if (!complete) {
      log("targets: not evaluated (they need every configuration at more than one worker count)")
    } else {
      log(`target (${targets.everyW.what}; ${handled}):`)
      for (const row of targets.everyW.rows) {
        const ratios = plan.workers.map((w) => `${row.ratios[w]}×`).join(" / ")
        log(`  ${describeKind(row.ours, isBatched(row.ours) ? plan.batchSize : 1).padEnd(40)} vs ${row.theirs.padEnd(16)} ${ratios} at W = ${plan.workers.join(" / ")}: ${row.met ? "MET" : "NOT MET"}`)
      }
      log(`target (${targets.scaling.what}): ${targets.scaling.rows.map((row) => `${row.ours} ${row.ratio}× ${row.met ? "MET" : "NOT MET"}`).join("; ")}`)
    }
    return 0
  } finally {
    await cleanup()
    process.off("SIGINT", onSignal)
    process.off("SIGTERM", onSignal)
  }
}
