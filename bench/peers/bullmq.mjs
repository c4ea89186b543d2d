// BullMQ 6.7.0 on the local Redis (127.0.0.1:6379, or FAIR_RELAY_REDIS_URL): enqueue one job at a
// time (`queue.add`), then one Worker with concurrency W until all are completed. Redis's own CPU is
// read from INFO before and after.
import { Queue, Worker } from "bullmq"
import IORedis from "ioredis"
import { cpuMicros, enqueueAll, options, orderTracker, processed, report, versionOf, waitFor } from "./common.mjs"

const url = process.env.FAIR_RELAY_REDIS_URL ?? "redis://127.0.0.1:6379"
const connection = new IORedis(url, { maxRetriesPerRequest: null })
const admin = new IORedis(url)
const name = `fair-relay-bench-${process.pid}-${options.workers}`
const config = async (key) => (await admin.config("GET", key))[1]
const durability = { appendonly: await config("appendonly"), save: await config("save"), version: (await admin.info("server")).match(/redis_version:(\S+)/)?.[1] }
const serverCpu = async () => {
  const info = await admin.info("cpu")
  const field = (key) => Number(info.match(new RegExp(`${key}:([0-9.]+)`))?.[1] ?? 0)
  return (field("used_cpu_user") + field("used_cpu_sys")) * 1e6
}

const queue = new Queue(name, { connection })
await queue.obliterate({ force: true })
const enqueue = await enqueueAll((data) => queue.add("noop", data))

const tracker = orderTracker()
const serverBefore = await serverCpu()
const cpu = cpuMicros()
const started = performance.now()
const worker = new Worker(name, async (job) => tracker.handle(job.data), { connection, concurrency: options.workers })
worker.on("completed", () => { tracker.completed++ })
await waitFor(() => tracker.completed >= options.events, started, options.maxSeconds)
const seconds = (performance.now() - started) / 1000
const used = cpuMicros() - cpu
const server = (await serverCpu()) - serverBefore
await worker.close()
await queue.obliterate({ force: true })
await queue.close()
await connection.quit()
await admin.quit()
report({
  peer: "bullmq",
  version: versionOf("bullmq", import.meta.url),
  driver: `ioredis ${versionOf("ioredis", import.meta.url)}, Redis ${durability.version}`,
  workers: options.workers,
  workersHow: `one Worker, concurrency ${options.workers}`,
  durability: `Redis, appendonly=${durability.appendonly}, save="${durability.save}"${durability.appendonly === "no" && durability.save === "" ? " (nothing persisted)" : ""}`,
  durabilitySettings: durability,
  order: "FIFO, no per-key groups (Pro only)",
  enqueue,
  process: { ...processed(tracker, seconds, used), serverCpuUsPerEvent: server / Math.max(1, tracker.completed) }
})
process.exit(0)
