// liteque 0.8.0 on SQLite (its own settings: WAL, synchronous=NORMAL), with better-sqlite3 11.9.1
// from this folder: enqueue one job at a time, then one Runner with concurrency W (poll 1 s).
import * as fs from "node:fs"
import * as path from "node:path"
import { buildDBClient, Runner, SqliteQueue } from "liteque"
import { cpuMicros, enqueueAll, options, orderTracker, processed, report, versionOf, waitFor } from "../common.mjs"

const file = path.join(options.dir, `liteque-${options.workers}.db`)
for (const suffix of ["", "-wal", "-shm"]) fs.rmSync(file + suffix, { force: true })
const db = buildDBClient(file, { runMigrations: true })
const client = db.$client ?? db.session?.client
const durability = client === undefined ? { synchronous: "unknown (no client handle)", journal_mode: "unknown" } : {
  synchronous: { 0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA" }[client.pragma("synchronous", { simple: true })],
  journal_mode: client.pragma("journal_mode", { simple: true })
}
const queue = new SqliteQueue("bench", db, { defaultJobArgs: { numRetries: 0 }, keepFailedJobs: false })
const enqueue = await enqueueAll((data) => queue.enqueue(data))

const tracker = orderTracker()
const pollIntervalMs = 1000
const runner = new Runner(queue, {
  run: async (job) => tracker.handle(job.data),
  onComplete: async () => { tracker.completed++ }
}, { pollIntervalMs, timeoutSecs: 60, concurrency: options.workers })
const cpu = cpuMicros()
const started = performance.now()
const running = runner.run()
await waitFor(() => tracker.completed >= options.events, started, options.maxSeconds)
const seconds = (performance.now() - started) / 1000
const used = cpuMicros() - cpu
runner.stop()
await running
client?.close()
for (const suffix of ["", "-wal", "-shm"]) fs.rmSync(file + suffix, { force: true })
report({
  peer: "liteque",
  version: versionOf("liteque", import.meta.url),
  driver: `better-sqlite3 ${versionOf("better-sqlite3", import.meta.url)}`,
  workers: options.workers,
  workersHow: `one Runner, concurrency ${options.workers}, pollIntervalMs ${pollIntervalMs}`,
  durability: `SQLite WAL (read back: journal_mode=${durability.journal_mode}, synchronous=${durability.synchronous})`,
  durabilitySettings: durability,
  order: "FIFO, no per-key guarantee",
  enqueue,
  process: processed(tracker, seconds, used)
})
process.exit(0)
