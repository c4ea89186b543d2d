/**
 * `npm run bench`: the claim-cost and drain benchmark (see bench/README.md).
 *
 *   npm run bench                       full run (backlogs 1k…1M, drain 20k, RSS drain of the 1M store)
 *   npm run bench -- --quick            about a minute (backlogs 1k…100k, smaller drains)
 *   npm run bench -- --rss-seconds N    time budget of the RSS drain (0: drain the whole store)
 *   npm run bench -- --out FILE         where to write the JSON (default bench/results/<mode>-<timestamp>.json)
 *   npm run bench -- --peers [--quick]  only the throughput table, with plainjob, liteque and BullMQ beside ours
 *   npm run bench -- --throughput       only the throughput table (floor and ours, no peers)
 *   npm run bench -- --pg [--quick]     the PostgreSQL bench instead (bench/pg/main.ts)
 */
import Database from "better-sqlite3"
import { execSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { measureClaims } from "./claim.js"
import type { ClaimResult } from "./claim.js"
import { commitCeiling } from "./ceiling.js"
import type { CeilingResult } from "./ceiling.js"
import { measureRss, rssRunName } from "./rss.js"
import type { RssRun } from "./rss.js"
import { benchDir, workDir } from "./stores.js"
import { chart } from "./svg.js"
import { measureThroughput, throughputTable } from "./throughput.js"

const args = process.argv.slice(2)
if (args.includes("--pg")) {
  const { runPgBench } = await import("./pg/main.js")
  process.exit(await runPgBench(args.filter((arg) => arg !== "--pg")))
}
const known = new Set(["--quick", "--rss-seconds", "--out", "--peers", "--throughput"])
for (const arg of args) {
  if (arg.startsWith("--") && !known.has(arg)) {
    console.error(`unknown option ${arg}; known: ${[...known].join(" ")}`)
    process.exit(2)
  }
}
const option = (name: string) => {
  const i = args.indexOf(name)
  return i < 0 ? undefined : args[i + 1]
}
const quick = args.includes("--quick")
const withPeers = args.includes("--peers")
// `--peers` and `--throughput` run the throughput table alone (claims and RSS are skipped).
const throughputOnly = withPeers || args.includes("--throughput")
const mode = `${throughputOnly ? (withPeers ? "peers-" : "throughput-") : ""}${quick ? "quick" : "full"}`

const plan = quick
  ? {
    backlogs: [{ events: 1_000, flows: 10 }, { events: 10_000, flows: 100 }, { events: 100_000, flows: 1_000 }],
    claims: { claims: 150, warmup: 5, queryBudgetMs: 400, ceilingBurstMs: 5 },
    ceilingSeconds: 1,
    throughput: {
      events: 1_024,
      flows: 64,
      batchSize: 64,
      daemonWorkers: 8,
      maxSeconds: 8,
      interleave: { everySeconds: 1, burstMs: 200 },
      peerWorkers: [1, 16]
    },
    rss: { events: 100_000, flows: 1_000 },
    rssRuns: [{ runtime: "tsx", entry: "fair-relay" }] satisfies ReadonlyArray<RssRun>,
    rssSeconds: 8
  }
  : {
    backlogs: [
      { events: 1_000, flows: 10 },
      { events: 10_000, flows: 100 },
      { events: 100_000, flows: 1_000 },
      { events: 1_000_000, flows: 10_000 }
    ],
    claims: { claims: 500, warmup: 10, queryBudgetMs: 3_000, ceilingBurstMs: 5 },
    ceilingSeconds: 3,
    throughput: {
      events: 20_000,
      flows: 64,
      batchSize: 64,
      daemonWorkers: 8,
      maxSeconds: 240,
      interleave: { everySeconds: 2, burstMs: 300 },
      peerWorkers: [1, 16]
    },
    rss: { events: 1_000_000, flows: 10_000 },
    // The main entry under tsx and compiled (judged), and compiled with the SQLite entry alone.
    rssRuns: [
      { runtime: "tsx", entry: "fair-relay" },
      { runtime: "compiled", entry: "fair-relay" },
      { runtime: "compiled", entry: "fair-relay/sqlite" }
    ] satisfies ReadonlyArray<RssRun>,
    rssSeconds: 150
  }
const rssSeconds = option("--rss-seconds") === undefined ? plan.rssSeconds : Number(option("--rss-seconds")) || 1e9

const t0 = performance.now()
const log = (line: string) => console.log(`[${((performance.now() - t0) / 1000).toFixed(1).padStart(6)}s] ${line}`)
const mb = (bytes: number) => Math.round((bytes / 2 ** 20) * 10) / 10
const r1 = (x: number) => Math.round(x * 10) / 10

const git = (command: string) => {
  try {
    return execSync(`git ${command}`, { cwd: benchDir, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()
  } catch {
    return null
  }
}
const version = (pkg: string) =>
  (JSON.parse(fs.readFileSync(path.join(benchDir, "..", "node_modules", pkg, "package.json"), "utf8")) as { version: string }).version
const sqliteVersion = () => {
  const db = new Database(":memory:")
  try {
    return (db.prepare("SELECT sqlite_version() AS v").get() as { v: string }).v
  } finally {
    db.close()
  }
}

const timestamp = new Date().toISOString()
const machine = {
  os: `${os.type()} ${os.release()} (${os.platform()}/${os.arch()})`,
  cpus: { count: os.cpus().length, model: os.cpus()[0]?.model ?? "unknown" },
  memoryMB: mb(os.totalmem()),
  node: process.version,
  sqlite: sqliteVersion(),
  packages: { effect: version("effect"), "@effect/sql-sqlite-node": version("@effect/sql-sqlite-node"), "better-sqlite3": version("better-sqlite3") },
  disk: `files under ${workDir}`,
  loadAverageAtStart: os.loadavg().map(r1)
}
const source = { commit: git("rev-parse HEAD"), dirtySrc: (git("status --porcelain -- :/src") ?? "") !== "" }
log(`fair-relay bench (${mode}) on ${machine.cpus.count}× ${machine.cpus.model}, node ${machine.node}, SQLite ${machine.sqlite}, load ${machine.loadAverageAtStart.join(" ")}`)

const ceiling = (label: string): CeilingResult & { readonly label: string } => {
  const result = { label, ...commitCeiling(plan.ceilingSeconds) }
  log(`raw durable commit ceiling (${label}): ${result.commitsPerSecond.toFixed(0)} commits/s (${result.meanCommitMs.toFixed(3)} ms each)`)
  return result
}

// 1. The disk's raw commit ceiling.
const ceilings = [ceiling("start")]

// 2–3. Claim latency per backlog: ours (durable and read-only) against the article's query.
const claimRun = throughputOnly ? null : await measureClaims(plan.backlogs, plan.claims, log)
const claims: ReadonlyArray<ClaimResult> = claimRun?.backlogs ?? []
if (claimRun !== null) {
  log(`raw durable commit ceiling (between claim rounds): ${claimRun.ceiling.commitsPerSecond.toFixed(0)} commits/s (${claimRun.ceiling.meanCommitMs.toFixed(3)} ms each)`)
}
for (const result of claims) {
  log(
    `${result.events.toLocaleString("en")} events / ${result.flows.toLocaleString("en")} flows: ` +
      `our claim ${result.ourClaim.meanMs.toFixed(3)} ms (${result.ourClaim.perSecond.toFixed(0)}/s, p50 ${result.ourClaim.p50Ms.toFixed(3)}), ` +
      `our turn query ${(result.ourTurnQuery.meanMs * 1000).toFixed(1)} µs, idle walk ${(result.idleTurnQuery.meanMs * 1000).toFixed(1)} µs, ` +
      `article ${result.articleQuery.meanMs.toFixed(2)} ms (${result.articleQuery.n} runs), same head: ${result.sameHead}` +
      (result.store.cached ? "" : ` [built in ${result.store.buildSeconds.toFixed(1)} s]`)
  )
}

// 4. Throughput: the floor, ours, and (--peers) the peers on one workload, with the ceiling on either side.
ceilings.push(ceiling("before throughput"))
const throughput = await measureThroughput(plan.throughput, withPeers, log)
ceilings.push(ceiling("after throughput"))
console.log(`\n${throughputTable(throughput)}\n`)

// 5. Peak RSS of a process draining the large store (batched), in a child process of its own:
// under tsx like the rest of the bench, and (full runs) as tsc-compiled JavaScript under plain
// node, loading the main entry — and the SQLite entry alone.
const rssRuns = []
for (const rssRun of throughputOnly ? [] : plan.rssRuns) {
  const name = rssRunName(rssRun)
  log(`RSS drain of ${plan.rss.events.toLocaleString("en")} events (${name}, n=${plan.throughput.batchSize}, up to ${rssSeconds} s)`)
  const run = await measureRss(plan.rss, plan.throughput.batchSize, rssSeconds, rssRun, log)
  rssRuns.push(run)
  log(
    `RSS drain (${name}): ${run.drained.toLocaleString("en")} events in ${run.seconds.toFixed(0)} s (${run.eventsPerSecond.toFixed(0)}/s), ` +
      `peak RSS ${run.peakRssMB} MB (baseline ${run.baselineRssMB} MB before opening any store)`
  )
}

// The peak-RSS target is judged on the compiled run of the main entry when there is one (see `targets.peakRss`).
const judgedRss = rssRuns.find((run) => run.runtime === "compiled" && run.entry === "fair-relay") ?? rssRuns[0]

// Targets (reported, not asserted). A target whose figures this run did not take is left out.
const row = (name: string) => throughput.rows.find((r) => r.name === name && r.status === "ok")
const tp = plan.throughput
const single = row("ours Relay.step FULL")
const batch = row(`ours Relay.stepBatch(${tp.batchSize}) FULL`)
const daemon = row(`ours relay.run({ workers: ${tp.daemonWorkers}, batchSize: 1 }) FULL`)
const daemonNormal = row(`ours relay.run({ workers: ${tp.daemonWorkers}, batchSize: 1 }) NORMAL`)
const oneWorker = row("ours relay.run({ workers: 1, batchSize: 1 }) FULL")
// The raw statements' own rates against the same bounds: how near the bound the statements allow.
const singleFloor = row("floor single-step FULL")
const exchangeFloor = row("floor single-step, settle + next claim in one commit FULL")
const floorFraction = (floor: typeof single, bound: number) =>
  floor === undefined ? null : { name: floor.name, eventsPerSecond: floor.eventsPerSecond, fraction: floor.eventsPerSecond / bound }
const batchNormal = row(`ours Relay.stepBatch(${tp.batchSize}) NORMAL`)
const handlerNormal = row(`ours Relay.stepBatch(${tp.batchSize}), in-memory handler like the peers' NORMAL`)
const plainjob = throughput.rows.filter((r) => r.system === "plainjob" && r.status === "ok")
const best = <R extends { readonly eventsPerSecond: number }>(rows: ReadonlyArray<R | undefined>) =>
  rows.reduce<R | undefined>((top, r) => (r === undefined || (top !== undefined && top.eventsPerSecond >= r.eventsPerSecond) ? top : r), undefined)
const bestPlainjob = best(plainjob)
// The same workload as the peers': their handlers accept and check order in memory; ours with the
// durable inbox does a receiver transaction in a second file besides (reported, not the target).
const bestOursNormal = handlerNormal
const bestOursInboxNormal = best([daemonNormal, batchNormal])
const drainCeiling = single?.interleavedCeiling?.commitsPerSecond
const first = claims[0]
const last = claims[claims.length - 1]
const targets = {
  ...(first !== undefined && last !== undefined ? {
    claimScaling: {
      what: `our claims/s at ${last.events} events ≥ 0.5 × claims/s at ${first.events} events`,
      atTargetBacklog: last.events === 1_000_000,
      ratioMean: last.ourClaim.perSecond / first.ourClaim.perSecond,
      ratioP50: first.ourClaim.p50Ms / last.ourClaim.p50Ms,
      met: last.ourClaim.perSecond >= 0.5 * first.ourClaim.perSecond
    }
  } : {}),
  ...(batch?.floor ? {
    batchedVsFloor: {
      what: `batched drain (n = ${tp.batchSize}, FULL) ≥ 0.5 × the batched floor, CPU per event ≤ 2.5 × the floor's`,
      eventsRatio: batch.floor.eventsRatio,
      cpuRatio: batch.floor.cpuRatio,
      met: batch.floor.eventsRatio >= 0.5 && batch.floor.cpuRatio <= 2.5
    }
  } : {}),
  ...(single !== undefined && drainCeiling !== undefined ? {
    singleDrain: {
      what: "single-step drain events/s ≥ 0.7 × (commit ceiling ÷ 3 commits per event)",
      commitsPerEvent: 3,
      ceilingCommitsPerSecond: drainCeiling,
      ceilingSource: "interleaved with the single-step drain",
      bound: drainCeiling / 3,
      eventsPerSecond: single.eventsPerSecond,
      fraction: single.eventsPerSecond / (drainCeiling / 3),
      floor: floorFraction(singleFloor, drainCeiling / 3),
      met: single.eventsPerSecond >= 0.7 * (drainCeiling / 3)
    }
  } : {}),
  // The same bound for the daemon's single worker, which settles one event and claims the next in
  // one commit: its commits per event are counted, not assumed (2 where a step makes 3).
  ...(oneWorker?.interleavedCeiling != null ? {
    singleDrainOneWorker: {
      what: "one daemon worker (relay.run({ workers: 1, batchSize: 1 })) events/s ≥ 0.7 × (commit ceiling ÷ 3 commits per event)",
      commitsPerEvent: oneWorker.commits === null ? null : (oneWorker.commits.queue + oneWorker.commits.inbox) / Math.max(1, oneWorker.drained),
      ceilingCommitsPerSecond: oneWorker.interleavedCeiling.commitsPerSecond,
      ceilingSource: "interleaved with this drain",
      bound: oneWorker.interleavedCeiling.commitsPerSecond / 3,
      eventsPerSecond: oneWorker.eventsPerSecond,
      fraction: oneWorker.eventsPerSecond / (oneWorker.interleavedCeiling.commitsPerSecond / 3),
      floor: floorFraction(exchangeFloor, oneWorker.interleavedCeiling.commitsPerSecond / 3),
      met: oneWorker.eventsPerSecond >= 0.7 * (oneWorker.interleavedCeiling.commitsPerSecond / 3)
    }
  } : {}),
  ...(single !== undefined && daemon !== undefined ? {
    daemonVsSingle: {
      what: `relay.run({ workers: ${tp.daemonWorkers}, batchSize: 1 }) ≥ 5 × one worker single-step (FULL)`,
      ratio: daemon.eventsPerSecond / single.eventsPerSecond,
      met: daemon.eventsPerSecond >= 5 * single.eventsPerSecond
    }
  } : {}),
  ...(bestPlainjob !== undefined ? {
    vsPlainjob: {
      what: "at equal durability (synchronous=NORMAL), our best processing rate ≥ plainjob's best on the same workload (an in-memory handler that checks each flow's order)",
      ours: bestOursNormal === undefined ? null : { name: bestOursNormal.name, eventsPerSecond: bestOursNormal.eventsPerSecond },
      plainjob: { name: bestPlainjob.name, eventsPerSecond: bestPlainjob.eventsPerSecond },
      ratio: bestOursNormal === undefined ? null : bestOursNormal.eventsPerSecond / bestPlainjob.eventsPerSecond,
      withDurableInbox: bestOursInboxNormal === undefined ? null : {
        name: bestOursInboxNormal.name,
        eventsPerSecond: bestOursInboxNormal.eventsPerSecond,
        ratio: bestOursInboxNormal.eventsPerSecond / bestPlainjob.eventsPerSecond
      },
      met: bestOursNormal !== undefined && bestOursNormal.eventsPerSecond >= bestPlainjob.eventsPerSecond
    }
  } : {}),
  ...(judgedRss !== undefined ? {
    peakRss: {
      what: "peak RSS while draining 1M events ≤ 300 MB (the compiled run of the main entry, as an application runs the library; the tsx run and the SQLite entry alone are reported beside it)",
      atTargetBacklog: rssRuns[0]!.events === 1_000_000,
      drainedAll: rssRuns[0]!.complete,
      peakRssMB: Math.max(...rssRuns.map((run) => run.peakRssMB)),
      byRun: Object.fromEntries(rssRuns.map((run) => [rssRunName(run), { peakRssMB: run.peakRssMB, met: run.peakRssMB <= 300 }])),
      // An application runs the compiled library under node; tsx's own transpiler holds some 180 MB
      // of the tsx child's RSS before any store is open (its baseline), so that run is reported, not judged.
      judgedOn: rssRunName(judgedRss),
      met: judgedRss.peakRssMB <= 300
    }
  } : {})
}

const command = `npm run bench${args.length > 0 ? ` -- ${args.join(" ")}` : ""}`
const results = {
  command,
  argv: process.argv,
  mode,
  timestamp,
  durationSeconds: r1((performance.now() - t0) / 1000),
  machine: { ...machine, loadAverageAtEnd: os.loadavg().map(r1) },
  source,
  plan,
  ceiling: ceilings,
  claimCeiling: claimRun?.ceiling ?? null,
  claimSql: claimRun?.sql ?? null,
  claims,
  throughput,
  rss: rssRuns,
  mainProcessPeakRssMB: r1(process.resourceUsage().maxRSS / 1024),
  targets
}

const resultsDir = path.join(benchDir, "results")
fs.mkdirSync(resultsDir, { recursive: true })
const out = option("--out") ?? path.join(resultsDir, `${mode}-${timestamp.replace(/[:.]/g, "-")}.json`)
fs.writeFileSync(out, JSON.stringify(results, null, 2) + "\n")
if (claims.length > 0) {
  const svg = path.join(resultsDir, quick ? "claim-latency-quick.svg" : "claim-latency.svg")
  fs.writeFileSync(svg, chart({ ...results, claimCeiling: claimRun!.ceiling }))
  log(`wrote ${path.relative(process.cwd(), svg)}`)
}
log(`wrote ${path.relative(process.cwd(), out)}`)
for (const [name, target] of Object.entries(targets)) {
  log(`target ${name}: ${target.met ? "MET" : "NOT MET"} — ${target.what}`)
}
