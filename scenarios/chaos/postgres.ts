/**
 * The parent's side of `npm run chaos -- --pg`: a throwaway database per run, the progress probe,
 * and the two faults of the server — terminating the relay's backends and restarting the server.
 *
 * The run gets a database of its own (not a schema) because a termination ends every `fair-relay`
 * backend of the current database: in a shared one it would also end other tests' connections.
 * The parent's own connections use another application name, so terminations spare them.
 */
import { execFile } from "node:child_process"
import * as fs from "node:fs"
import pg from "pg"

/** The server the run uses when FAIR_RELAY_PG_URL is not set. */
export const defaultPgUrl = "postgres://postgres@127.0.0.1:5432/postgres"

/** What a termination runs (the statement): every relay backend of the run's database. */
const terminateStatement = "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity " +
  "WHERE application_name = 'fair-relay' AND pid <> pg_backend_pid() AND datname = current_database()"

/** The run's database and the parent's connection to it. */
export interface PgRun {
  /** The URL of the run's database, for every process of the run. */
  readonly url: string
  readonly database: string
  /** How many events the queue holds acked, or undefined while the server does not answer. */
  readonly acked: () => Promise<number | undefined>
  /** Terminates the relay's backends: how many it ended, or undefined if the server did not answer. */
  readonly terminate: () => Promise<number | undefined>
  /** Closes the parent's connections and drops the database unless `keep`. */
  readonly close: (keep: boolean) => Promise<void>
}

const withDatabase = (url: string, database: string): string => {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

/** A pool that never throws for a connection the server ended: the query fails, the next one reconnects. */
const pool = (url: string) => {
  const p = new pg.Pool({ connectionString: url, max: 1, application_name: "fair-relay-chaos", connectionTimeoutMillis: 3_000 })
  p.on("error", () => {})
  return p
}

/** Creates a fresh database on the server of `baseUrl` for one run. */
export const createRun = async (baseUrl: string): Promise<PgRun> => {
  const database = `fair_relay_chaos_${process.pid}_${Date.now().toString(36)}`
  const admin = pool(baseUrl)
  await admin.query(`CREATE DATABASE ${database}`)
  const url = withDatabase(baseUrl, database)
  const probe = pool(url)
  const attempt = async <A>(f: () => Promise<A>): Promise<A | undefined> => {
    try {
      return await f()
    } catch {
      return undefined
    }
  }
  return {
    url,
    database,
    acked: () =>
      attempt(async () =>
        Number((await probe.query<{ n: string }>("SELECT count(*) AS n FROM relay_event WHERE state = 'acked'")).rows[0]!.n)
      ),
    terminate: () => attempt(async () => (await probe.query<{ ok: boolean }>(terminateStatement)).rows.filter((r) => r.ok).length),
    close: async (keep) => {
      await probe.end()
      if (!keep) await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
      await admin.end()
    }
  }
}

/** How the parent restarts the server, or why it cannot. */
export type ServerControl =
  | { readonly available: true; readonly cluster: string; readonly restart: () => Promise<void>; readonly ensureRunning: () => Promise<void> }
  | { readonly available: false; readonly reason: string }

const run = (args: ReadonlyArray<string>) =>
  new Promise<void>((resolve, reject) =>
    execFile("pg_ctlcluster", ["--skip-systemctl-redirect", ...args], { timeout: 120_000 }, (error, _stdout, stderr) =>
      error ? reject(new Error(`pg_ctlcluster ${args.join(" ")} failed: ${stderr.trim() || error.message}`)) : resolve()))

const onPath = (command: string) =>
  (process.env.PATH ?? "").split(":").some((dir) => dir !== "" && fs.existsSync(`${dir}/${command}`))

/**
 * The local cluster `main` of the version installed under /etc/postgresql (the newest if there are
 * several), restarted with `pg_ctlcluster` (fast shutdown, waits until the server accepts
 * connections again).
 */
export const serverControl = (): ServerControl => {
  if (!onPath("pg_ctlcluster")) return { available: false, reason: "pg_ctlcluster is not on PATH" }
  let versions: Array<string>
  try {
    versions = fs.readdirSync("/etc/postgresql").sort((a, b) => Number(a) - Number(b))
  } catch {
    return { available: false, reason: "/etc/postgresql does not exist" }
  }
  const version = versions.at(-1)
  if (version === undefined) return { available: false, reason: "/etc/postgresql is empty" }
  return {
    available: true,
    cluster: `${version}/main`,
    restart: () => run([version, "main", "restart"]),
    // "start" fails when the server runs: only its failure to start afterwards matters.
    ensureRunning: () => run([version, "main", "start"]).catch(() => run([version, "main", "status"]))
  }
}

/** What the server faults of a run did. */
export interface ServerFaultCounts {
  terminations: number
  /** Backends the terminations ended (several per termination: every process's pool). */
  terminatedBackends: number
  restarts: number
}

/**
 * Terminations and restarts spread over the run's progress, one fault at a time: terminations paced
 * like kills (all done by ~93%; one counts when it ended at least one backend), restart i of R once
 * `(i + 1) / (R + 1)` of the events are acked (a failed restart is reported on stderr, not
 * retried). `tick(progress)` is called often by the run; `settle()` waits for the fault under way
 * and makes sure the server runs again.
 */
export const serverFaults = (
  run: PgRun,
  plan: { readonly terminations: number; readonly restarts: number },
  control: ServerControl,
  random: () => number,
  log: (line: string) => void
) => {
  const counts: ServerFaultCounts = { terminations: 0, terminatedBackends: 0, restarts: 0 }
  const restarts = control.available ? plan.restarts : 0
  let restartsTried = 0
  let current: Promise<void> | undefined
  const start = (fault: () => Promise<void>) => {
    current = fault().finally(() => {
      current = undefined
    })
  }
  const tick = (progress: number) => {
    if (current !== undefined) return
    const restartsDue = Math.min(restarts, Math.floor(progress * (restarts + 1)))
    const terminationsDue = Math.floor(plan.terminations * Math.min(1, progress * 1.08))
    if (control.available && restartsTried < restartsDue) {
      restartsTried++
      start(async () => {
        const began = Date.now()
        try {
          await control.restart()
          counts.restarts++
          log(`server restart ${counts.restarts} (${control.cluster}) took ${Date.now() - began} ms`)
        } catch (error) {
          process.stderr.write(`chaos: server restart failed: ${error instanceof Error ? error.message : String(error)}\n`)
          await control.ensureRunning().catch(() => {})
        }
      })
    } else if (counts.terminations < terminationsDue && random() < 0.2) {
      start(async () => {
        const ended = await run.terminate()
        if (ended === undefined || ended === 0) return // nothing was ended: try again later
        counts.terminations++
        counts.terminatedBackends += ended
      })
    }
  }
  const settle = async () => {
    await current
    if (control.available) await control.ensureRunning()
  }
  return { counts, tick, settle }
}
