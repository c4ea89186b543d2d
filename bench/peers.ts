/**
 * The peers, side by side with ours (`npm run bench -- --peers`): plainjob and liteque on SQLite,
 * BullMQ on the local Redis, each driven by a plain-JavaScript child in `bench/peers/` (its own
 * package.json and lockfile, installed by `bench/peers/install.sh` when missing; liteque in
 * `bench/peers/liteque/` with the better-sqlite3 it needs). See /work/shared/PEERS.md.
 */
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { benchDir, workDir } from "./stores.js"

/** The peers and where their drivers live. */
export const peers = {
  plainjob: { script: "peers/plainjob.mjs", installed: "peers/node_modules/plainjob" },
  liteque: { script: "peers/liteque/liteque.mjs", installed: "peers/liteque/node_modules/liteque" },
  bullmq: { script: "peers/bullmq.mjs", installed: "peers/node_modules/bullmq" }
} as const

/** A peer's name. */
export type Peer = keyof typeof peers

/** What a peer's child reports (see `bench/peers/common.mjs`). */
export interface PeerResult {
  readonly peer: Peer
  readonly version: string
  readonly driver: string
  readonly workers: number
  readonly workersHow: string
  readonly durability: string
  readonly durabilitySettings: Record<string, unknown>
  readonly order: string
  readonly enqueue: { readonly events: number; readonly seconds: number; readonly eventsPerSecond: number; readonly cpuUsPerEvent: number }
  readonly process: {
    readonly drained: number
    readonly complete: boolean
    readonly seconds: number
    readonly eventsPerSecond: number
    readonly cpuUsPerEvent: number
    readonly handled: number
    readonly orderViolations: number
    readonly serverCpuUsPerEvent?: number
  }
}

/** A peer run that failed (not installed, Redis down, …): reported, not fatal. */
export interface PeerFailure {
  readonly peer: Peer
  readonly workers: number
  readonly error: string
}

/** Installs the peers with `bench/peers/install.sh` unless every one is there. */
export const ensurePeersInstalled = (log: (line: string) => void) => {
  const missing = Object.values(peers).filter((p) => !fs.existsSync(path.join(benchDir, p.installed)))
  if (missing.length === 0) return
  log(`installing the peers (bench/peers/install.sh; missing: ${missing.map((p) => p.installed).join(", ")})`)
  execFileSync("bash", [path.join(benchDir, "peers", "install.sh")], { stdio: "inherit" })
}

/** Runs one peer with `workers` workers on `events` jobs over `flows` keys, in a child process. */
export const runPeer = (
  peer: Peer,
  workload: { readonly events: number; readonly flows: number; readonly workers: number; readonly maxSeconds: number }
): Promise<PeerResult | PeerFailure> =>
  new Promise((resolve) => {
    fs.mkdirSync(workDir, { recursive: true })
    const script = path.join(benchDir, peers[peer].script)
    const child = spawn(process.execPath, [script, JSON.stringify({ ...workload, dir: workDir })], {
      cwd: path.dirname(script),
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => { stdout += chunk.toString() })
    child.stderr.on("data", (chunk: Buffer) => { stderr += chunk.toString() })
    child.on("error", (error) => resolve({ peer, workers: workload.workers, error: String(error) }))
    child.on("close", (code) => {
      const line = stdout.split("\n").find((l) => l.startsWith("PEER-RESULT "))
      if (code === 0 && line !== undefined) return resolve(JSON.parse(line.slice("PEER-RESULT ".length)) as PeerResult)
      resolve({ peer, workers: workload.workers, error: `exit ${code}: ${(stderr || stdout).trim().slice(-500)}` })
    })
  })
