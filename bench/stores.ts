/**
 * Backlog stores for the benchmark, built through the library's own `enqueueBatch` (chunks of
 * 10,000, one transaction each) at the fixed logical tick 0. Built stores are cached under
 * `bench/.cache/` and reused while the queue's schema source is unchanged; every measurement
 * runs on a fresh copy, so the cached store stays pristine.
 */
import Database from "better-sqlite3"
import { Effect } from "effect"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { MaxBatchSize, RelayQueue, SqliteRelayQueue, TickClock } from "../src/index.js"

export const benchDir = path.dirname(fileURLToPath(import.meta.url))
export const cacheDir = path.join(benchDir, ".cache")
/** Every measured file lives here, on the same disk as the cache. */
export const workDir = path.join(cacheDir, "work")

/** A backlog: `events` events spread round-robin over `flows` flows. */
export interface Backlog {
  readonly events: number
  readonly flows: number
}

/** What a build cost (or cost when the cached copy was made). */
export interface BuiltStore extends Backlog {
  readonly file: string
  readonly cached: boolean
  readonly buildSeconds: number
  readonly bytes: number
}

/** Flow ids sort like their numbers. */
export const flowId = (i: number) => `flow-${String(i).padStart(6, "0")}`

/** The i-th event of a backlog: flows take turns, so each flow's seqs are 1, 2, 3, … */
export const eventInput = (i: number, flows: number) => ({
  eventId: `evt-${String(i).padStart(8, "0")}`,
  flowId: flowId(i % flows),
  body: { delta: 1 }
})

// The cache is only as good as the schema and the writes that made it.
const schemaHash = () => {
  const hash = crypto.createHash("sha256")
  for (const file of ["QueueSchema.ts", "SqlRelayQueue.ts"]) hash.update(fs.readFileSync(path.join(benchDir, "../src/layers/internal", file)))
  return hash.digest("hex").slice(0, 16)
}

export const removeDb = (file: string) => {
  for (const suffix of ["", "-wal", "-shm", "-journal"]) fs.rmSync(file + suffix, { force: true })
}

/** The path of `name` in the work directory (made if missing), with no database there: a run's own store. */
export const freshWorkFile = (name: string): string => {
  fs.mkdirSync(workDir, { recursive: true })
  const file = path.join(workDir, name)
  removeDb(file)
  return file
}

/** Folds the WAL into the main file, so one file is the whole store. */
export const checkpoint = (file: string) => {
  const db = new Database(file)
  db.pragma("wal_checkpoint(TRUNCATE)")
  db.close()
}

/** Enqueues a whole backlog into `file` with the library, in chunks of `MaxBatchSize`. */
export const fill = (file: string, backlog: Backlog, log: (line: string) => void = () => {}) =>
  Effect.gen(function*() {
    const queue = yield* RelayQueue
    const started = performance.now()
    for (let from = 0; from < backlog.events; from += MaxBatchSize) {
      const to = Math.min(backlog.events, from + MaxBatchSize)
      const chunk = Array.from({ length: to - from }, (_, k) => eventInput(from + k, backlog.flows))
      yield* queue.enqueueBatch(chunk)
      if (to % 100_000 === 0) log(`  enqueued ${to.toLocaleString("en")} / ${backlog.events.toLocaleString("en")}`)
    }
    return (performance.now() - started) / 1000
  }).pipe(
    Effect.provide(SqliteRelayQueue.layer({ filename: file })),
    TickClock.at(0),
    Effect.orDie
  )

// One run uses one version of each store, even if the source changes while it runs.
const thisRun = new Map<string, BuiltStore>()

/** The cached store of a backlog, building it first if it is missing or stale. */
export const cachedStore = async (backlog: Backlog, log: (line: string) => void): Promise<BuiltStore> => {
  const key = `${backlog.events}-${backlog.flows}`
  const known = thisRun.get(key)
  if (known !== undefined) return { ...known, cached: true }
  const store = await openCachedStore(backlog, log)
  thisRun.set(key, store)
  return store
}

const openCachedStore = async (backlog: Backlog, log: (line: string) => void): Promise<BuiltStore> => {
  fs.mkdirSync(cacheDir, { recursive: true })
  const base = path.join(cacheDir, `backlog-${backlog.events}-${backlog.flows}`)
  const file = `${base}.db`
  const metaFile = `${base}.json`
  const hash = schemaHash()
  if (fs.existsSync(file) && fs.existsSync(metaFile)) {
    const meta = JSON.parse(fs.readFileSync(metaFile, "utf8")) as { schemaHash: string; buildSeconds: number }
    if (meta.schemaHash === hash) {
      return { ...backlog, file, cached: true, buildSeconds: meta.buildSeconds, bytes: fs.statSync(file).size }
    }
  }
  log(`building ${backlog.events.toLocaleString("en")} events / ${backlog.flows.toLocaleString("en")} flows via enqueueBatch`)
  const tmp = `${base}.building.db`
  removeDb(tmp)
  const buildSeconds = await Effect.runPromise(fill(tmp, backlog, log))
  checkpoint(tmp)
  removeDb(file)
  fs.renameSync(tmp, file)
  removeDb(tmp)
  fs.writeFileSync(metaFile, JSON.stringify({ ...backlog, schemaHash: hash, buildSeconds }, null, 2) + "\n")
  return { ...backlog, file, cached: false, buildSeconds, bytes: fs.statSync(file).size }
}

/** A fresh, writable copy of a cached store in the work directory. */
export const workCopy = (store: BuiltStore, name: string): string => {
  const file = freshWorkFile(name)
  fs.copyFileSync(store.file, file)
  return file
}
