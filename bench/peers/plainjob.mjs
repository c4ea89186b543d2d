// plainjob 0.0.14 on SQLite (its own settings: WAL, synchronous=NORMAL): enqueue one job at a time,
// then W worker instances in this process (plainjob has no concurrency option) until all are done.
import Database from "better-sqlite3"
import * as fs from "node:fs"
import * as path from "node:path"
import { better, defineQueue, defineWorker } from "plainjob"
import { cpuMicros, enqueueAll, options, orderTracker, processed, quietLogger, report, versionOf, waitFor } from "./common.mjs"

const file = path.join(options.dir, `plainjob-${options.workers}.db`)
for (const suffix of ["", "-wal", "-shm"]) fs.rmSync(file + suffix, { force: true })
const db = new Database(file)
const queue = defineQueue({ connection: better(db), logger: quietLogger })
const durability = {
  synchronous: { 0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA" }[db.pragma("synchronous", { simple: true })],
  journal_mode: db.pragma("journal_mode", { simple: true })
}
const enqueue = await enqueueAll((data) => queue.add("noop", data))

const tracker = orderTracker()
const workers = Array.from({ length: options.workers }, () =>
  defineWorker("noop", async (job) => tracker.handle(JSON.parse(job.data)), {
    queue,
    logger: quietLogger,
    onCompleted: () => { tracker.completed++ }
  }))
const cpu = cpuMicros()
const started = performance.now()
const running = workers.map((worker) => worker.start())
await waitFor(() => tracker.completed >= options.events, started, options.maxSeconds)
const seconds = (performance.now() - started) / 1000
const used = cpuMicros() - cpu
await Promise.all(workers.map((worker) => worker.stop()))
await Promise.allSettled(running)
queue.close()
db.close()
for (const suffix of ["", "-wal", "-shm"]) fs.rmSync(file + suffix, { force: true })
report({
  peer: "plainjob",
  version: versionOf("plainjob", import.meta.url),
  driver: `better-sqlite3 ${versionOf("better-sqlite3", import.meta.url)}`,
  workers: options.workers,
  workersHow: `${options.workers} defineWorker instances in one process (default poll 1 s, never reached while jobs wait)`,
  durability: `SQLite WAL (read back: journal_mode=${durability.journal_mode}, synchronous=${durability.synchronous})`,
  durabilitySettings: durability,
  order: "global FIFO, no per-key guarantee",
  enqueue,
  process: processed(tracker, seconds, used)
})
process.exit(0)
