/**
 * Parent side of the real-process scenarios: spawns a TypeScript child (`node --import tsx`, or
 * its bundle under the test suite), reads its JSON-line messages from stdout and writes JSON-line
 * commands to its stdin.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { createInterface } from "node:readline"
import { fileURLToPath } from "node:url"

/** The repository root: children run there so `--import tsx` resolves the repo's tsx. */
export const repoRoot = fileURLToPath(new URL("../../", import.meta.url))

/** Absolute path of a child script that lives next to this module. */
export const childScript = (name: string): string => fileURLToPath(new URL(`./${name}`, import.meta.url))

/** One JSON line a child wrote on stdout. */
export type ChildMessage = { readonly type: string } & Readonly<Record<string, unknown>>

/** How a child ended. */
export interface ChildExit {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
}

/** A running child process. */
export interface Child {
  readonly pid: number
  /** The next message on stdout; rejects if the child ends first or nothing comes within `timeoutMs`. */
  readonly next: (timeoutMs?: number) => Promise<ChildMessage>
  /** Like `next`, but fails unless the message has the given `type`. */
  readonly expect: (type: string, timeoutMs?: number) => Promise<ChildMessage>
  /** Writes one JSON line to the child's stdin. */
  readonly send: (message: unknown) => void
  /** Closes the child's stdin (the children treat this as "exit"). */
  readonly end: () => void
  /** Resolves when the process has exited and its output is fully read. */
  readonly exit: Promise<ChildExit>
  /** Everything the child wrote on stderr so far. */
  readonly stderr: () => string
  /** Non-JSON lines the child wrote on stdout. */
  readonly noise: () => ReadonlyArray<string>
  /** Kills this child (by its own pid) if it is still running. */
  readonly kill: () => void
}

/** Default wait for one message: generous, because a loaded 2-core machine starts tsx slowly. */
export const DefaultMessageTimeoutMillis = 45_000

const isMessage = (value: unknown): value is ChildMessage =>
  typeof value === "object" && value !== null && typeof (value as { type?: unknown }).type === "string"

/**
 * The bundle of `script` when FAIR_RELAY_CHILD_BUNDLES names a directory holding one
 * (`<dir>/<script's path in the repository, .ts → .mjs>`: the test suite bundles its leaf children
 * there once per run, test/support/bundles.ts), otherwise undefined.
 */
const bundleOf = (script: string): string | undefined => {
  const dir = process.env.FAIR_RELAY_CHILD_BUNDLES
  if (dir === undefined || dir === "") return undefined
  const relative = path.relative(repoRoot, script)
  if (relative.startsWith("..") || path.isAbsolute(relative)) return undefined
  const bundle = path.join(dir, relative.replace(/\.ts$/, ".mjs"))
  return fs.existsSync(bundle) ? bundle : undefined
}

/**
 * Spawns `node --import tsx <script> ...args` in the repository root, or `node <bundle> ...args`
 * when the script has a bundle (see `bundleOf`): the same code, without compiling it at each start.
 */
export const spawnChild = (script: string, args: ReadonlyArray<string> = []): Child => {
  const bundle = bundleOf(script)
  const proc = spawn(process.execPath, bundle === undefined ? ["--import", "tsx", script, ...args] : [bundle, ...args], {
    cwd: repoRoot,
    env: process.env,
    stdio: ["pipe", "pipe", "pipe"]
  })
  if (proc.pid === undefined) throw new Error(`cannot spawn ${script}`)
  const pid = proc.pid

  const queue: Array<ChildMessage> = []
  const waiters: Array<{ resolve: (m: ChildMessage) => void; reject: (e: Error) => void }> = []
  const noise: Array<string> = []
  let stderr = ""
  let closed: ChildExit | undefined

  proc.stderr.setEncoding("utf8")
  proc.stderr.on("data", (chunk: string) => {
    stderr += chunk
  })
  // A child that already exited makes writes fail with EPIPE; the exit is what we report.
  proc.stdin.on("error", () => {})

  createInterface({ input: proc.stdout }).on("line", (line) => {
    let parsed: unknown = undefined
    try {
      parsed = line.startsWith("{") ? JSON.parse(line) : undefined
    } catch {
      parsed = undefined
    }
    if (!isMessage(parsed)) {
      noise.push(line)
      return
    }
    const waiter = waiters.shift()
    if (waiter) waiter.resolve(parsed)
    else queue.push(parsed)
  })

  const describe = () => `child ${pid} (${script.split("/").pop()})`
  const exit = new Promise<ChildExit>((resolve) => {
    proc.on("close", (code, signal) => {
      closed = { code, signal }
      for (const waiter of waiters.splice(0)) {
        waiter.reject(new Error(`${describe()} exited (code ${code}, signal ${signal}) before its next message\n${stderr}`))
      }
      resolve(closed)
    })
  })

  const next = (timeoutMs = DefaultMessageTimeoutMillis) => {
    const queued = queue.shift()
    if (queued) return Promise.resolve(queued)
    if (closed) {
      return Promise.reject(new Error(`${describe()} has exited (code ${closed.code}); no further message\n${stderr}`))
    }
    return new Promise<ChildMessage>((resolve, reject) => {
      const waiter = {
        resolve: (m: ChildMessage) => {
          clearTimeout(timer)
          resolve(m)
        },
        reject: (e: Error) => {
          clearTimeout(timer)
          reject(e)
        }
      }
      const timer = setTimeout(() => {
        const index = waiters.indexOf(waiter)
        if (index >= 0) waiters.splice(index, 1)
        reject(new Error(`${describe()} sent nothing within ${timeoutMs} ms\n${stderr}`))
      }, timeoutMs)
      waiters.push(waiter)
    })
  }

  const expect = async (type: string, timeoutMs?: number) => {
    const message = await next(timeoutMs)
    if (message.type !== type) {
      throw new Error(`${describe()}: expected a "${type}" message, got ${JSON.stringify(message)}\n${stderr}`)
    }
    return message
  }

  return {
    pid,
    next,
    expect,
    send: (message) => {
      if (!proc.stdin.destroyed) proc.stdin.write(`${JSON.stringify(message)}\n`)
    },
    end: () => {
      if (!proc.stdin.destroyed) proc.stdin.end()
    },
    exit,
    stderr: () => stderr,
    noise: () => noise,
    kill: () => {
      if (closed === undefined) proc.kill("SIGKILL")
    }
  }
}

/** Runs `body` with the children, killing any still running if `body` throws. */
export const withChildren = async <A>(children: ReadonlyArray<Child>, body: () => Promise<A>): Promise<A> => {
  try {
    return await body()
  } catch (error) {
    for (const child of children) child.kill()
    await Promise.all(children.map((child) => child.exit))
    throw error
  }
}
