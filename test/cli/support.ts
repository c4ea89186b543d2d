/**
 * Running the real `fair-relay` CLI in a child process (the bundle built for this test run, or
 * `node bin/fair-relay.mjs …` from source through tsx with FAIR_RELAY_CLI_SOURCE=1), and the
 * stores the CLI tests start from.
 */
import Database from "better-sqlite3"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { inject } from "vitest"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { testTmpDir } from "../support/tmp.js"

/** The repository root. */
export const repositoryRoot = fileURLToPath(new URL("../../", import.meta.url))

/** What a run of the bin left. */
export interface Ran {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
}

/** Options of one run of the bin. */
export interface BinOptions {
  readonly env?: Readonly<Record<string, string>>
  /** Called once the child is started (to signal it, say). */
  readonly started?: (child: import("node:child_process").ChildProcess) => void
  readonly timeoutMillis?: number
  /** Written to the child's standard input (otherwise stdin is closed). */
  readonly input?: string
  /** Run as this user (possible when the tests run as root). */
  readonly user?: { readonly uid: number; readonly gid: number }
}

/**
 * The CLI bundle built for this `vitest run` from the current source (test/support/bundles.ts,
 * a globalSetup), or "" with FAIR_RELAY_CLI_SOURCE=1: then `bin` runs the source through tsx.
 */
const cliBundle = inject("cliBundle")

/**
 * Runs the CLI with `args` from the repository root, always built from the current source: the
 * bundle made for this run (`node <bundle> ...args`, the same esbuild options as the shipped
 * dist/cli/fair-relay.mjs), or with FAIR_RELAY_CLI_SOURCE=1 `node bin/fair-relay.mjs ...args`
 * running src/ through tsx.
 */
export const bin = (args: ReadonlyArray<string>, options: BinOptions = {}): Promise<Ran> =>
  new Promise((resolve, reject) => {
    const env: Record<string, string | undefined> = { ...process.env, FAIR_RELAY_CLI_SOURCE: "1", ...options.env }
    if (options.env?.FAIR_RELAY_DB === undefined) delete env.FAIR_RELAY_DB
    const entry = cliBundle === "" ? path.join("bin", "fair-relay.mjs") : cliBundle
    const child = spawn(process.execPath, [entry, ...args], {
      cwd: repositoryRoot,
      env,
      stdio: [options.input === undefined ? "ignore" : "pipe", "pipe", "pipe"],
      ...(options.user === undefined ? {} : { uid: options.user.uid, gid: options.user.gid })
    })
    if (options.input !== undefined) child.stdin!.end(options.input)
    let stdout = ""
    let stderr = ""
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (stdout += chunk))
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (stderr += chunk))
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      reject(new Error(`fair-relay ${args.join(" ")} did not finish in time\nstdout: ${stdout}\nstderr: ${stderr}`))
    }, options.timeoutMillis ?? 45_000)
    child.on("error", reject)
    child.on("close", (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr })
    })
    options.started?.(child)
  })

/** Runs `tasks` at most `limit` at a time (each bin start costs about a second of CPU). */
export const pool = async <A>(limit: number, tasks: ReadonlyArray<() => Promise<A>>): Promise<Array<A>> => {
  const results: Array<A> = new Array(tasks.length)
  let next = 0
  const lane = async () => {
    while (next < tasks.length) {
      const i = next++
      results[i] = await tasks[i]!()
    }
  }
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, lane))
  return results
}

/** How many bin runs go at once. */
export const Parallel = Math.max(2, Math.min(4, os.availableParallelism()))

/** A fresh temporary directory. */
export const tempDir = (label: string): string => fs.mkdtempSync(path.join(testTmpDir(), `fair-relay-cli-${label}-`))

/** The non-empty lines of an output. */
export const lines = (text: string): Array<string> => text.split("\n").filter((line) => line.trim() !== "")

/**
 * A queue store holding A1 (delta 10) quarantined by the receiver's refusal at generation 1, A2
 * (delta 1) behind it, and B1 (delta 3) ready — written through the library, in this process.
 */
export const quarantinedStore = (file: string): Promise<void> =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const queue = yield* SqliteRelayQueue.make({ filename: file, policy: { leaseTicks: 30_000 } })
    yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 10 } })
    yield* queue.enqueue({ eventId: "A2", flowId: "A", body: { delta: 1 } })
    yield* queue.enqueue({ eventId: "B1", flowId: "B", body: { delta: 3 } })
    const claimed = yield* queue.claim
    if (claimed._tag !== "Claimed" || claimed.event.eventId !== "A1") return yield* Effect.dieMessage("expected to claim A1")
    yield* queue.settle(claimed.token, { _tag: "Rejected", code: "unsupported_delta" })
  })))

/** Another application's SQLite database (no fair-relay tables). */
export const otherApplication = (file: string): void => {
  const db = new Database(file)
  try {
    db.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
    db.prepare("INSERT INTO customers (name) VALUES (?)").run("Ada")
  } finally {
    db.close()
  }
}

/** Runs SQL on a store directly (outside the library). */
export const execOn = (file: string, sql: string): void => {
  const db = new Database(file, { fileMustExist: true })
  try {
    db.exec(sql)
  } finally {
    db.close()
  }
}

/** The per-flow totals of the sample receiver's store. */
export const totals = (file: string): Record<string, number> => {
  const db = new Database(file, { fileMustExist: true, readonly: true })
  try {
    const rows = db.prepare("SELECT flow_id, total FROM counter_total ORDER BY flow_id").all() as Array<{ flow_id: string; total: number }>
    return Object.fromEntries(rows.map((row) => [row.flow_id, Number(row.total)]))
  } finally {
    db.close()
  }
}

/** The tables of a SQLite file. */
export const tablesOf = (file: string): Array<string> => {
  const db = new Database(file, { fileMustExist: true, readonly: true })
  try {
    return (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all() as Array<{ name: string }>).map((r) => r.name)
  } finally {
    db.close()
  }
}
