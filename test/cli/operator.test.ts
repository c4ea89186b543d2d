/**
 * The operator's frictions (issue 15) on the real bin: help that reads well when piped, parser
 * errors that name the option, bodies from a file or stdin, `run` on a store it cannot write
 * (one line, exit 1, no endless retry), `run` stopped by SIGINT (summary, exit 130), `clock`,
 * `show` of a head backing off, and the same commands on PostgreSQL when FAIR_RELAY_PG_URL is set.
 */
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { bin, lines, Parallel, pool, tempDir } from "./support.js"

const dir = tempDir("operator")
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

const ansi = /\u001b\[/

/** A store holding the given events (flow, id, delta), written through the library. */
const storeWith = (file: string, events: ReadonlyArray<readonly [string, string, number]>) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const queue = yield* SqliteRelayQueue.make({ filename: file })
    for (const [flowId, eventId, delta] of events) yield* queue.enqueue({ eventId, flowId, body: { delta } })
  })))

describe("help and parser errors", () => {
  it("piped help has no escape codes, no generic option text, fits 80 columns, and names the program in usage", async () => {
    const commands = ["status", "flows", "groups", "events", "show", "redrive", "audit", "enqueue", "clock", "run", "demo"]
    const runs = await pool(Parallel, [
      () => bin(["--help"]),
      () => bin(["--help"], { env: { NO_COLOR: "1" } }),
      () => bin(["clock", "reset", "--help"]),
      ...commands.map((command) => () => bin([command, "--help"]))
    ])
    const [root, noColor, reset, ...each] = runs
    for (const ran of runs) {
      expect(ran!.code, ran!.stderr).toBe(0)
      expect(ran!.stdout).not.toMatch(ansi)
      expect(ran!.stdout).not.toContain("A user-defined piece of text")
      expect(ran!.stdout).not.toContain("This setting is optional")
      for (const line of ran!.stdout.split("\n")) expect(line.length, line).toBeLessThanOrEqual(80)
    }
    expect(noColor!.stdout).toBe(root!.stdout)
    expect(root!.stdout).toMatch(/^ {2}\$ fair-relay \[--db DB\] \[--json\] <command>/m)
    expect(reset!.stdout).toMatch(/^ {2}\$ fair-relay clock reset /m)
    each.forEach((ran, i) => {
      expect(ran!.stdout).toMatch(new RegExp(`^ {2}\\$ fair-relay ${commands[i]}( |$)`, "m"))
      // Every option is followed by its own description.
      const text = ran!.stdout.split("\n")
      text.forEach((line, j) => {
        if (/^ {2}--/.test(line)) expect(text[j + 1], `${commands[i]}: ${line} has no description`).toMatch(/^ {6}\S/)
      })
    })
  }, 240_000)

  it("a malformed option value is refused with the option's name, before any store is opened", async () => {
    const missing = path.join(dir, "never.db")
    const cases: ReadonlyArray<readonly [ReadonlyArray<string>, RegExp]> = [
      [["redrive", "A1", "--db", missing, "--generation", "abc", "--reason", "x"], /^--generation: expected a whole number of at least 0, got "abc"$/],
      [["events", "--db", missing, "--state", "bogus"], /^--state: expected one of ready, inflight, acked, quarantined, discarded, got "bogus"$/],
      [["events", "--db", missing, "--limit", "0"], /^--limit: expected a whole number from 1 to \d+, got "0"$/],
      [["run", "--db", missing, "--inbox", path.join(dir, "x.db"), "--poll", "soon"], /^--poll: "soon" is not a duration/],
      [["run", "--db", missing, "--inbox", path.join(dir, "x.db"), "--retry-log-interval", "soon"], /^--retry-log-interval: "soon" is not a duration/],
      [["run", "--db", missing, "--http", "not a url"], /^--http: "not a url" is not a URL/],
      [["run", "--db", missing, "--http", "ftp://example.com/x"], /^--http: "ftp:\/\/example.com\/x" is not an http:\/\/ or https:\/\/ URL$/],
      [["enqueue", "--db", missing, "--flow", "A", "--id", "A1", "--body", "{x"], /^--body: not valid JSON \(/],
      [["events", "--db", missing, "--flow", ""], /^--flow: flowId must not be empty$/]
    ]
    const runs = await pool(Parallel, cases.map(([args]) => () => bin(args)))
    runs.forEach((ran, i) => {
      const context = `${cases[i]![0].join(" ")}\n${ran.stderr}`
      expect(ran.code, context).toBe(2)
      expect(lines(ran.stderr), context).toHaveLength(1)
      expect(lines(ran.stderr)[0], context).toMatch(cases[i]![1])
      expect(ran.stdout).toBe("")
    })
    expect(fs.existsSync(missing)).toBe(false)
  }, 240_000)
})

describe("enqueue bodies from a file or standard input", () => {
  it("--body-file FILE and --body-file - store the document; exactly one body is required", async () => {
    const db = path.join(dir, "bodies.db")
    await storeWith(db, [])
    const large = { delta: 1, padding: "x".repeat(200_000) }
    const file = path.join(dir, "body.json")
    fs.writeFileSync(file, JSON.stringify(large))
    const fromFile = await bin(["enqueue", "--db", db, "--flow", "A", "--id", "A1", "--body-file", file])
    const fromStdin = await bin(["enqueue", "--db", db, "--flow", "A", "--id", "A2", "--body-file", "-"], { input: `{"delta": 2}` })
    const both = await bin(["enqueue", "--db", db, "--flow", "A", "--id", "A3", "--body", "{}", "--body-file", file])
    const bad = await bin(["enqueue", "--db", db, "--flow", "A", "--id", "A3", "--body-file", "-"], { input: "{nope" })
    expect(fromFile.code, fromFile.stderr).toBe(0)
    expect(fromFile.stdout.trim()).toBe("enqueued A1 as A#1")
    expect(fromStdin.code, fromStdin.stderr).toBe(0)
    expect(fromStdin.stdout.trim()).toBe("enqueued A2 as A#2")
    expect(both.code).toBe(2)
    expect(lines(both.stderr)).toEqual([expect.stringMatching(/exactly one body.*\(InvalidOption\)$/)])
    expect(bad.code).toBe(2)
    expect(lines(bad.stderr)).toEqual([expect.stringMatching(/^fair-relay: --body-file: standard input is not valid JSON/)])
    const shown = await bin(["show", "A1", "--db", db, "--json"])
    expect((JSON.parse(shown.stdout) as { event: { body: unknown } }).event.body).toEqual(large)
  }, 240_000)
})

describe("run on a store it cannot write", () => {
  const asRoot = process.getuid?.() === 0
  it("exits 1 with one SqlError line instead of retrying forever", async () => {
    // Root writes any file: run the bin as `nobody`, for whom the store is read-only.
    const locked = fs.mkdtempSync(path.join(dir, "locked-"))
    const writable = fs.mkdtempSync(path.join(dir, "inbox-"))
    const db = path.join(locked, "queue.db")
    await storeWith(db, [["A", "A1", 1], ["B", "B1", 2]])
    fs.chmodSync(dir, 0o755)
    fs.chmodSync(db, 0o444)
    fs.chmodSync(locked, 0o777)
    fs.chmodSync(writable, 0o777)
    const before = fs.readFileSync(db)
    const ran = await bin(
      ["run", "--db", db, "--inbox", path.join(writable, "inbox.db"), "--until-idle", "--poll", "100ms"],
      { ...(asRoot ? { user: { uid: 65534, gid: 65534 } } : {}), timeoutMillis: 60_000 }
    )
    expect(ran.code, ran.stderr).toBe(1)
    const errors = lines(ran.stderr).filter((line) => line.startsWith("fair-relay:"))
    expect(errors).toEqual([expect.stringMatching(/^fair-relay: the worker stopped: ".*queue\.db" refused a write: .*readonly database \(SqlError\)$/)])
    expect(lines(ran.stderr).at(-1)).toBe(errors[0])
    expect(ran.stdout).toBe("")
    expect(fs.readFileSync(db).equals(before)).toBe(true)
  }, 120_000)
})

describe("run stopped by a signal", () => {
  it("on SIGINT prints the summary, then exits 130", async () => {
    const db = path.join(dir, "sigint.db")
    await storeWith(db, [["A", "A1", 1]])
    // Interrupted once "relay started" is logged (the worker runs).
    const { code, stderr, stdout } = await bin(["run", "--db", db, "--inbox", path.join(dir, "sigint-inbox.db"), "--json"], {
      timeoutMillis: 60_000,
      started: (child) => {
        let seen = ""
        child.stderr!.on("data", (chunk: string) => {
          seen += chunk
          if (/relay started/.test(seen)) child.kill("SIGINT")
        })
      }
    })
    expect(code, stderr).toBe(130)
    const summary = JSON.parse(stdout) as { stopped: string; stats: { byState: Record<string, number> } }
    expect(summary.stopped).toBe("stopped by SIGINT")
    expect(Object.values(summary.stats.byState).reduce((a, b) => a + b, 0)).toBe(1)
    // Each log line carries one message.
    for (const line of lines(stderr)) expect(line.match(/ message=/g)?.length ?? 0, line).toBeLessThanOrEqual(1)
  }, 120_000)
})

describe("clock and show", () => {
  it("clock shows the persisted tick and the skew; reset is a dry run unless --yes", async () => {
    const db = path.join(dir, "clock.db")
    await storeWith(db, [["A", "A1", 1]])
    const [shown, dry, blank] = await Promise.all([
      bin(["clock", "--db", db, "--json"]),
      bin(["clock", "reset", "--db", db, "--reason", "host clock was a day ahead", "--by", "ops"]),
      bin(["clock", "reset", "--db", db, "--reason", "  "])
    ])
    expect(shown.code, shown.stderr).toBe(0)
    const reading = JSON.parse(shown.stdout) as { tick: number; now: number; aheadMillis: number }
    expect(reading.aheadMillis).toBe(reading.tick - reading.now)
    expect(dry.code, dry.stderr).toBe(0)
    expect(dry.stdout).toMatch(/^dry run: /)
    expect(blank.code).toBe(2)
    const done = await bin(["clock", "reset", "--db", db, "--reason", "host clock was a day ahead", "--by", "ops", "--yes", "--json"])
    expect(done.code, done.stderr).toBe(0)
    expect(JSON.parse(done.stdout)).toMatchObject({ reason: "host clock was a day ahead", actor: "ops", eventsAdjusted: expect.any(Number) })
  }, 240_000)

  it("show of a head backing off says so, with the receiver's last Retry reason", async () => {
    const db = path.join(dir, "backoff.db")
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const queue = yield* SqliteRelayQueue.make({ filename: db, policy: { backoffBase: "1 hour", backoffCap: "1 hour" } })
      yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
      const claimed = yield* queue.claim
      if (claimed._tag !== "Claimed") return yield* Effect.dieMessage("expected a claim")
      yield* queue.settle(claimed.token, { _tag: "Retry", reason: "unavailable" })
    })))
    const shown = await bin(["show", "A1", "--db", db])
    expect(shown.code, shown.stderr).toBe(0)
    expect(shown.stdout).toMatch(/^state +ready, backing off/m)
    expect(shown.stdout).toMatch(/^last retry reason +unavailable$/m)
  }, 120_000)
})

const pgUrl = process.env.FAIR_RELAY_PG_URL
const poolerUrl = process.env.FAIR_RELAY_PGBOUNCER_URL

describe("PostgreSQL stores", () => {
  it.skipIf(pgUrl === undefined)("enqueue, run, status, show and redrive work on --db postgres://… (needs FAIR_RELAY_PG_URL)", async () => {
    const url = pgUrl!
    const inbox = path.join(dir, "pg-inbox.db")
    const flow = `pg-${Date.now()}`
    const id = (n: number) => `${flow}-${n}`
    for (const [n, delta] of [[1, 10], [2, 1]] as const) {
      const ran = await bin(["enqueue", "--db", url, "--flow", flow, "--id", id(n), "--body", JSON.stringify({ delta })])
      expect(ran.code, ran.stderr).toBe(0)
    }
    const limited = await bin(["run", "--db", url, "--inbox", inbox, "--max-delta", "5", "--until-idle"])
    expect(limited.code, limited.stderr).toBe(0)
    expect(limited.stdout).toContain(`${id(1)}  generation 1  Rejected unsupported_delta → Quarantined`)
    const shown = await bin(["show", id(1), "--db", url, "--json"])
    expect(shown.code, shown.stderr).toBe(0)
    expect(JSON.parse(shown.stdout)).toMatchObject({ event: { state: "quarantined", generation: 1 } })
    const redriven = await bin(["redrive", id(1), "--db", url, "--generation", "1", "--reason", "limit raised", "--by", "pg-op"])
    expect(redriven.code, redriven.stderr).toBe(0)
    const raised = await bin(["run", "--db", url, "--inbox", inbox, "--max-delta", "1000", "--until-idle", "--json"])
    expect(raised.code, raised.stderr).toBe(0)
    const audit = await bin(["audit", "--db", url, "--event", id(1), "--json"])
    expect(JSON.parse(audit.stdout)).toEqual([expect.objectContaining({ eventId: id(1), actor: "pg-op", reason: "limit raised" })])
  }, 240_000)

  it.skipIf(pgUrl === undefined || poolerUrl === undefined)(
    "behind PgBouncer in transaction mode: enqueue, run, status work as they are; a bad FAIR_RELAY_PG_PREPARED_STATEMENTS is one usage line (needs FAIR_RELAY_PGBOUNCER_URL)",
    async () => {
      // The contract suite's database, through the pooler.
      const url = new URL(poolerUrl!)
      url.pathname = new URL(pgUrl!).pathname
      const env = {}
      const inbox = path.join(dir, "pooler-inbox.db")
      const flow = `pooled-${Date.now()}`
      for (const n of [1, 2, 3]) {
        const ran = await bin(["enqueue", "--db", url.toString(), "--flow", flow, "--id", `${flow}-${n}`, "--body", JSON.stringify({ delta: n })], { env })
        expect(ran.code, ran.stderr).toBe(0)
      }
      const ran = await bin(["run", "--db", url.toString(), "--inbox", inbox, "--until-idle", "--json"], { env })
      expect(ran.code, ran.stderr).toBe(0)
      const shown = await bin(["show", `${flow}-3`, "--db", url.toString(), "--json"], { env })
      expect(shown.code, shown.stderr).toBe(0)
      expect(JSON.parse(shown.stdout)).toMatchObject({ event: { state: "acked" } })
      const bad = await bin(["status", "--db", url.toString()], { env: { FAIR_RELAY_PG_PREPARED_STATEMENTS: "sometimes" } })
      expect(bad.code).toBe(2)
      expect(lines(bad.stderr)).toEqual([expect.stringContaining("FAIR_RELAY_PG_PREPARED_STATEMENTS must be true or false")])
    },
    240_000
  )

  it.skipIf(pgUrl === undefined)("a PostgreSQL database that does not exist is one line with the server's reason (needs FAIR_RELAY_PG_URL)", async () => {
    const url = new URL(pgUrl!)
    url.pathname = "/fair_relay_no_such_database"
    const ran = await bin(["status", "--db", url.toString()])
    expect(ran.code).toBe(1)
    expect(lines(ran.stderr)).toEqual([expect.stringMatching(/database "fair_relay_no_such_database" does not exist \(SqlError\)$/)])
  }, 120_000)
})
