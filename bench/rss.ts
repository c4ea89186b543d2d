/**
 * Peak RSS while draining a large store: forks `rss-child.ts` on a fresh copy of the store and
 * collects what it measured. The child runs either under tsx, like the rest of the bench, or as
 * JavaScript compiled by tsc (`bench/tsconfig.rss.json` → `bench/.cache/dist`) under plain node,
 * as an application would: tsx's in-process transpiling alone costs some 70 MB of RSS.
 */
import { execFileSync, fork } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { countAcked } from "./drain.js"
import type { LoopResult } from "./drain.js"
import { benchDir, cachedStore, removeDb, workCopy, workDir } from "./stores.js"
import type { Backlog } from "./stores.js"

/** How the child runs: `tsx` (TypeScript loader) or `compiled` (tsc output, plain node). */
export type Runtime = "tsx" | "compiled"

/** What the child loads: the main entry (everything), or the SQLite entry the drain needs. */
export type Entry = "fair-relay" | "fair-relay/sqlite"

/** One RSS drain: how the child runs and what it loads. */
export interface RssRun {
  readonly runtime: Runtime
  readonly entry: Entry
}

/** A run's name in the log and the JSON, e.g. "compiled, fair-relay/sqlite". */
export const rssRunName = ({ entry, runtime }: RssRun) => `${runtime}, ${entry}`

export interface RssResult extends Backlog, LoopResult, RssRun {
  readonly batchSize: number
  readonly eventsPerSecond: number
  readonly ackedAfter: number
  /** RSS of the child before it opened anything (node, tsx when it runs under it, the entry's modules). */
  readonly baselineRssMB: number
  /** `process.resourceUsage().maxRSS` of the child at the end. */
  readonly peakRssMB: number
  readonly samples: ReadonlyArray<{ readonly seconds: number; readonly drained: number; readonly rssMB: number; readonly heapUsedMB: number }>
}

let compiled: string | undefined

/** Compiles the child and the library with tsc (once per run); returns the child's .js path. */
const compileChild = (log: (line: string) => void): string => {
  if (compiled !== undefined) return compiled
  log("compiling the RSS child with tsc (bench/tsconfig.rss.json)")
  const tsc = path.join(benchDir, "..", "node_modules", "typescript", "bin", "tsc")
  try {
    execFileSync(process.execPath, [tsc, "-p", path.join(benchDir, "tsconfig.rss.json")], { stdio: "pipe" })
  } catch (error) {
    // Type errors elsewhere in a work in progress do not stop the emit; a missing output does.
    log(`tsc reported errors (emitted anyway): ${String((error as { stdout?: unknown }).stdout ?? error).slice(0, 300)}`)
  }
  const file = path.join(benchDir, ".cache", "dist", "bench", "rss-child.js")
  if (!fs.existsSync(file)) throw new Error(`tsc did not emit ${file}`)
  compiled = file
  return file
}

export const measureRss = async (
  backlog: Backlog,
  batchSize: number,
  maxSeconds: number,
  { entry, runtime }: RssRun,
  log: (line: string) => void
): Promise<RssResult> => {
  const store = await cachedStore(backlog, log)
  const child = runtime === "tsx" ? path.join(benchDir, "rss-child.ts") : compileChild(log)
  const queueFile = workCopy(store, `rss-${backlog.events}.queue.db`)
  const inboxFile = path.join(workDir, `rss-${backlog.events}.inbox.db`)
  removeDb(inboxFile)
  try {
    const forked = fork(child, [queueFile, inboxFile, String(maxSeconds), String(batchSize), entry], {
      execArgv: runtime === "tsx" ? process.execArgv : [],
      stdio: ["ignore", "inherit", "inherit", "ipc"]
    })
    const figures = await new Promise<Omit<RssResult, keyof Backlog | keyof RssRun | "batchSize" | "eventsPerSecond" | "ackedAfter">>((resolve, reject) => {
      let received: unknown
      forked.on("message", (message) => { received = message })
      forked.on("error", reject)
      forked.on("exit", (code) => (received !== undefined ? resolve(received as never) : reject(new Error(`rss child exited with ${code}`))))
    })
    return { ...backlog, runtime, entry, batchSize, ...figures, eventsPerSecond: figures.drained / figures.seconds, ackedAfter: countAcked(queueFile) }
  } finally {
    removeDb(queueFile)
    removeDb(inboxFile)
  }
}
