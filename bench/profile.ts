/**
 * A CPU profile of the batched drain (`Relay.stepBatch(64)`, FULL), or with `--daemon` of
 * `relay.run({ workers: 8, batchSize: 1 })` (`--workers N` for another count), with `--single` of
 * `Relay.step` one event at a time; `--normal` for `synchronous: "normal"` stores; `--in-memory`
 * with the throughput table's in-memory handler instead of the durable inbox (the queue's share of
 * a step). For diagnosis;
 * not part of `npm run bench`. Profile,
 * then summarize self time by package:
 *
 *   node --import tsx --cpu-prof --cpu-prof-dir bench/.cache/profile bench/profile.ts [events] [--daemon [--workers N] | --single] [--normal]
 *     (also writes bench/.cache/profile/drain-only-….cpuprofile: the drain alone, via node:inspector;
 *     with `--import ./bench/dist.mjs` after tsx, of the compiled library, whose frames name lines)
 *   npx tsx bench/profile.ts --summarize bench/.cache/profile/CPU.….cpuprofile
 *
 * With `--no-profile`, no CPU profile either: the drain's figures without the profiler's sampling
 * thread and its cost on the main one.
 *
 * With `--callgrind`, under valgrind's callgrind (`bench/instructions.sh` runs it so), no CPU
 * profile: the instruction counters are zeroed as the drain starts and dumped as it ends.
 *
 * With `--allocations`, also the bytes the drain allocates per event (those the collector has since
 * freed included) and the sites that allocate most; with `--promoted`, only those that outlived the
 * young generation's collections. Every run prints the CPU of the process's helper threads (V8's
 * collector and compiler among them) and the bytes written (`/proc/self/io`) per event.
 *
 * With `--floor`, the same drain by the floor (`floor.ts`: the statements through raw
 * better-sqlite3) on the same files: batched n = 64, `--single` one event per step (3 commits),
 * `--daemon` settle + next claim in one commit as one daemon worker commits — what the library's
 * figures are compared with, counted the same way (`bash bench/instructions.sh 3000 --floor
 * --daemon --normal`).
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string }
}

interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

const native = new Set(["run", "all", "get", "iterate", "exec", "prepare", "pragma", "raw", "columns", "safeIntegers"])

/** The package a profile node's own time is charged to. */
export const groupOf = ({ functionName, url }: ProfileNode["callFrame"]): string => {
  if (functionName === "(garbage collector)") return "GC"
  if (functionName === "(idle)") return "idle"
  if (functionName === "(program)") return "(program: V8/native, unattributed)"
  // V8 charges a native method's time to its JS caller's frame; these names show up only when called from elsewhere.
  if (url === "" && native.has(functionName)) return "better-sqlite3 (native: SQLite, fsync)"
  if (url.includes("/node_modules/better-sqlite3/")) return "better-sqlite3 (JS)"
  if (url.includes("/node_modules/@effect/sql-sqlite-node/")) return "@effect/sql-sqlite-node (with the native SQLite calls it makes: statements, fsync)"
  if (url.includes("/node_modules/@effect/sql/")) return "@effect/sql"
  if (url.includes("/node_modules/@effect/experimental/")) return "@effect/experimental"
  if (url.includes("/node_modules/effect/")) return "effect runtime"
  if (url.includes("/node_modules/tsx/") || url.includes("/node_modules/esbuild/")) return "tsx"
  // The library as TypeScript, or compiled (`bench/dist.mjs`); not a package's own src/ or dist/.
  if (!url.includes("/node_modules/") && (url.includes("/src/") || url.includes("/dist/"))) return "ours"
  if (url.includes("/bench/")) return "bench harness"
  if (url.startsWith("node:") || url === "") return "node internals / other native"
  return "other"
}

/** Self time by group (ms, share) and the top self-time functions. */
export const summarize = (profile: Profile) => {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]))
  const self = new Map<number, number>()
  profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)))
  const groups = new Map<string, number>()
  const functions = new Map<string, number>()
  let total = 0
  for (const [id, micros] of self) {
    const frame = byId.get(id)!.callFrame
    const group = groupOf(frame)
    groups.set(group, (groups.get(group) ?? 0) + micros)
    const name = `${frame.functionName || "(anonymous)"} ${frame.url.replace(/^.*\/node_modules\//, "").replace(/^.*\/work\/main\//, "")}`
    functions.set(`${group}: ${name}`, (functions.get(`${group}: ${name}`) ?? 0) + micros)
    total += micros
  }
  const rows = (m: Map<string, number>, n: number) =>
    [...m].sort((a, b) => b[1] - a[1]).slice(0, n).map(([name, micros]) => ({ name, ms: Math.round(micros / 1000), share: Math.round((micros / total) * 1000) / 10 }))
  return { totalMs: Math.round(total / 1000), groups: rows(groups, 20), top: rows(functions, 25) }
}

const args = process.argv.slice(2)
if (args[0] === "--summarize") {
  const file = args[1]
  if (file === undefined) {
    console.error("usage: npx tsx bench/profile.ts --summarize FILE.cpuprofile")
    process.exit(2)
  }
  const summary = summarize(JSON.parse(fs.readFileSync(file, "utf8")) as Profile)
  console.log(`total sampled ${summary.totalMs} ms\n\nself time by group:`)
  for (const g of summary.groups) console.log(`  ${String(g.share).padStart(5)} %  ${String(g.ms).padStart(6)} ms  ${g.name}`)
  console.log("\ntop self-time functions:")
  for (const f of summary.top) console.log(`  ${String(f.share).padStart(5)} %  ${String(f.ms).padStart(6)} ms  ${f.name}`)
} else {
  // Imported here so that summarizing works while the library is mid-edit.
  const { Effect, Ref } = await import("effect")
  const { Counter, SqliteInbox, TickClock } = await import("../src/index.js")
  const { daemonLoop, delivered, drainLoop, queueOnlyLayer, relayLayer } = await import("./drain.js")
  const { fill, freshWorkFile, removeDb, workDir } = await import("./stores.js")
  const { allocationLines, startAllocationProfile, startCpuProfile } = await import("./cpuProfile.js")
  const { helperThreadsCpuMs } = await import("./pg/procCpu.js")
  const { floorDrain } = await import("./floor.js")
  const events = Number(args.find((arg, i) => !arg.startsWith("--") && args[i - 1] !== "--workers") ?? 10_000)
  const daemon = args.includes("--daemon")
  const single = args.includes("--single")
  const workersAt = args.indexOf("--workers")
  const workers = workersAt < 0 ? 8 : Number(args[workersAt + 1])
  const synchronous = args.includes("--normal") ? "normal" as const : "full" as const
  const callgrind = args.includes("--callgrind")
  const inMemory = args.includes("--in-memory")
  const bare = args.includes("--no-profile")
  const callgrindControl = (flag: "--zero" | "--dump") => execFileSync("callgrind_control", [flag, String(process.pid)], { stdio: "ignore" })
  const queueFile = freshWorkFile("profile.queue.db")
  const inboxFile = freshWorkFile("profile.inbox.db")
  const out = path.join(workDir, "..", "profile", `drain-only-${Date.now()}.cpuprofile`)
  // Besides any whole-process `--cpu-prof`, profile the drain alone (no module loading, no fill;
  // the stores are opened before the profile starts).
  let profiler: Awaited<ReturnType<typeof startCpuProfile>> | undefined
  // With `--allocations`, the bytes the drain allocates per event and where (see `startAllocationProfile`);
  // with `--promoted`, only those that outlived the young generation's collections.
  let allocationProfiler: Awaited<ReturnType<typeof startAllocationProfile>> | undefined
  let helpers = 0
  // The bytes this process handed to write(2) and those that reached the block layer: what the WAL
  // frames and checkpoints of a drain cost the disk, per event.
  const written = () => {
    const io = fs.readFileSync("/proc/self/io", "utf8")
    const field = (name: string) => Number(new RegExp(`^${name}: (\\d+)$`, "m").exec(io)?.[1] ?? NaN)
    return { wchar: field("wchar"), writeBytes: field("write_bytes") }
  }
  let writtenBefore = { wchar: 0, writeBytes: 0 }
  // Under callgrind, its counters see the drain alone.
  const startProfiles = async () => {
    if (args.includes("--allocations") || args.includes("--promoted")) allocationProfiler = await startAllocationProfile({ promoted: args.includes("--promoted") })
    helpers = helperThreadsCpuMs()
    writtenBefore = written()
    if (callgrind) callgrindControl("--zero")
    else if (!bare) profiler = await startCpuProfile()
  }
  const report = async (loop: { readonly drained: number; readonly seconds: number; readonly cpuSeconds: number }) => {
    if (callgrind) callgrindControl("--dump")
    const helpersMs = helperThreadsCpuMs() - helpers
    const writtenAfter = written()
    const allocated = await allocationProfiler?.stop(loop.drained)
    if (profiler !== undefined) {
      await profiler.stop(out)
      console.log(`wrote ${path.relative(process.cwd(), out)} (the drain alone)`)
    }
    console.log(`drained ${loop.drained} events in ${loop.seconds.toFixed(2)} s: ${(loop.drained / loop.seconds).toFixed(0)} events/s, CPU ${((loop.cpuSeconds * 1e6) / loop.drained).toFixed(0)} µs/event`)
    console.log(`  of that CPU, this process's helper threads (V8's collector and compiler, libuv): ${((helpersMs * 1000) / loop.drained).toFixed(0)} µs/event`)
    console.log(`  written per event: ${((writtenAfter.wchar - writtenBefore.wchar) / loop.drained / 1024).toFixed(1)} KiB to write(2), ${((writtenAfter.writeBytes - writtenBefore.writeBytes) / loop.drained / 1024).toFixed(1)} KiB to the disk`)
    if (allocated !== undefined) for (const line of allocationLines(allocated, "event")) console.log(line)
  }
  await Effect.runPromise(fill(queueFile, { events, flows: 64 }))
  if (args.includes("--floor")) {
    // The floor drains into an inbox the library made, as in the throughput table.
    await Effect.runPromise(
      Effect.gen(function*() {
        yield* SqliteInbox.make({ filename: inboxFile, business: Counter.business(yield* Ref.make(1000)) })
      }).pipe(Effect.scoped, Effect.orDie)
    )
    const batchSize = daemon || single ? 1 : 64
    // The floor opens its two connections inside the counted part (once per run); its lease is the throughput table's.
    await startProfiles()
    const loop = floorDrain({ queueFile, inboxFile, batchSize, exchange: daemon, synchronous, leaseTicks: 60_000, maxSeconds: 600 })
    await report(loop)
  } else {
    const seen = delivered()
    const loop = await Effect.runPromise(
      Effect.gen(function*() {
        yield* Effect.promise(startProfiles)
        return daemon ? yield* daemonLoop(events, 600, seen, { workers, batchSize: 1 }) : yield* drainLoop(single ? 1 : 64, 600, !inMemory)
      }).pipe(
        Effect.provide(inMemory ? queueOnlyLayer(queueFile, { synchronous }, seen) : relayLayer(queueFile, inboxFile, { synchronous }, seen)),
        daemon ? (effect) => effect : TickClock.at(0)
      )
    )
    await report(loop)
  }
  removeDb(queueFile)
  removeDb(inboxFile)
}
