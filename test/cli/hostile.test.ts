/**
 * What the CLI prints when the data or the command line is hostile or careless: suggested
 * commands that a POSIX shell runs as written (ids chosen by producers are quoted), no
 * PostgreSQL password on any line, no terminal escapes from a receiver's reply, a damaged store
 * reported as an operation failure (exit 1), and `pg`'s SSL warning kept off stderr.
 */
import Database from "better-sqlite3"
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { bin, lines, tempDir } from "./support.js"

const dir = tempDir("hostile")
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

/**
 * Runs `command` in bash in a fresh directory where `fair-relay` is a function printing its
 * arguments one per line: what the shell would hand the CLI, and which files appeared.
 */
const pasted = (command: string): { readonly args: Array<string>; readonly files: Array<string> } => {
  const cwd = fs.mkdtempSync(path.join(dir, "paste-"))
  const out = execFileSync("bash", ["-c", `fair-relay() { printf '%s\\0' "$@"; }\n${command}`], { cwd, encoding: "utf8" })
  return { args: out.split("\0").slice(0, -1), files: fs.readdirSync(cwd) }
}

const hostileId = "inv-7$(touch X)`touch Y`'q\" ;touch Z"

describe("suggested commands", () => {
  it("show suggests a redrive command that bash runs with the id as one literal word, running nothing else", async () => {
    const db = path.join(dir, "quoted.db")
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const queue = yield* SqliteRelayQueue.make({ filename: db })
      yield* queue.enqueue({ eventId: hostileId, flowId: "F $(touch W)", body: {} })
      const claimed = yield* queue.claim
      if (claimed._tag !== "Claimed") return yield* Effect.dieMessage("expected a claim")
      yield* queue.settle(claimed.token, { _tag: "Rejected", code: "refused" })
    })))
    const shown = await bin(["show", hostileId, "--db", db])
    expect(shown.code, shown.stderr).toBe(0)
    const line = lines(shown.stdout).find((l) => l.startsWith("release it: "))
    expect(line).toBeDefined()
    const { args, files } = pasted(line!.slice("release it: ".length))
    expect(files).toEqual([])
    expect(args).toEqual(["redrive", hostileId, "--generation", "1", "--reason", "…"])

    // The next page of a flow's events: the flow id passes literally too (and the cursor is a seq).
    const listed = await bin(["events", "--db", db, "--flow", "F $(touch W)", "--limit", "1"])
    expect(listed.code, listed.stderr).toBe(0)
    const more = lines(listed.stdout).find((l) => l.startsWith("… more: "))
    const next = pasted(`fair-relay events ${more!.slice("… more: ".length)}`)
    expect(next.files).toEqual([])
    expect(next.args).toEqual(["events", "--flow", "F $(touch W)", "--after-seq", "1"])
  }, 120_000)
})

describe("escapes from a receiver", () => {
  it("run prints a receiver's Retry reason and Rejected code without control characters", async () => {
    const db = path.join(dir, "escapes.db")
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const queue = yield* SqliteRelayQueue.make({ filename: db, policy: { backoffBase: 1, backoffCap: 1 } })
      yield* queue.enqueue({ eventId: "E1", flowId: "E", body: {} })
    })))
    let calls = 0
    const server = http.createServer((request, response) => {
      request.resume().on("end", () => {
        calls++
        const reply = calls === 1
          ? { _tag: "Retry", reason: "busy\u001b]0;owned\u0007\u001b[2J" }
          : { _tag: "Rejected", code: "bad\u001b[31mred\u009b" }
        // The fair-relay reply, which a receiver opts into by its media type.
        response.writeHead(200, { "content-type": "application/vnd.fair-relay.reply+json" }).end(JSON.stringify(reply))
      })
    })
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/deliveries`
      const ran = await bin(["run", "--db", db, "--http", url, "--until-idle", "--unsigned"])
      expect(ran.code, ran.stderr).toBe(0)
      expect(calls).toBe(2)
      // eslint-disable-next-line no-control-regex
      expect(ran.stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/)
      expect(ran.stdout).toMatch(/^E1 {2}generation 1 {2}Retry \(busy /m)
      expect(ran.stdout).toMatch(/^E1 {2}generation 2 {2}Rejected bad /m)
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }, 120_000)
})

describe("a damaged store", () => {
  it("a corrupt stored-settings row exits 1 (the store's fault), not 2 (usage)", async () => {
    const db = path.join(dir, "settings.db")
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const queue = yield* SqliteRelayQueue.make({ filename: db })
      yield* queue.enqueue({ eventId: "S1", flowId: "S", body: {} })
    })))
    const raw = new Database(db)
    raw.exec("UPDATE relay_settings SET protocol = '{not json' WHERE id = 1")
    raw.close()
    const before = fs.readFileSync(db)
    const ran = await bin(["status", "--db", db])
    expect(ran.code, ran.stderr).toBe(1)
    expect(lines(ran.stderr)).toEqual([expect.stringMatching(/protocol settings are unreadable.*\(IncompatibleStore\)$/)])
    expect(fs.readFileSync(db).equals(before)).toBe(true)
  }, 120_000)
})

const pgUrl = process.env.FAIR_RELAY_PG_URL

describe("PostgreSQL URLs", () => {
  it("sslmode=require gives the CLI's one error line, without pg's SSL warning", async () => {
    // Nothing listens on port 1: the open fails after pg has parsed the URL.
    const ran = await bin(["status", "--db", "postgres://fair:relay@127.0.0.1:1/none?sslmode=require"])
    expect(ran.code).toBe(1)
    expect(lines(ran.stderr), ran.stderr).toEqual([expect.stringMatching(/^fair-relay: cannot open postgres:\/\/fair:\*\*\*@127\.0\.0\.1:1\/none\?sslmode=require: /)])
  }, 120_000)

  it.skipIf(pgUrl === undefined)("no command prints the password of --db postgres://user:secret@… (needs FAIR_RELAY_PG_URL)", async () => {
    const url = new URL(pgUrl!)
    // The server trusts local connections: the password is carried, not checked.
    url.password = "s3cret-pw"
    url.searchParams.set("password", "s3cret-pw")
    const db = url.toString()
    const flow = `masked-${Date.now()}`
    const runs = [
      await bin(["enqueue", "--db", db, "--flow", flow, "--id", `${flow}-1`, "--body", "{}"]),
      await bin(["status", "--db", db]),
      await bin(["status", "--db", db, "--json"]),
      await bin(["clock", "--db", db]),
      await bin(["clock", "--db", db, "--json"]),
      await bin(["prune", "--db", db, "--dry-run", "--json"])
    ]
    for (const ran of runs) {
      expect(ran.code, ran.stderr).toBe(0)
      expect(ran.stdout + ran.stderr).not.toContain("s3cret-pw")
    }
    expect(lines(runs[1]!.stdout)[0]).toMatch(/^queue store +postgres:\/\/postgres:\*\*\*@/)
    expect(JSON.parse(runs[2]!.stdout).db).toMatch(/^postgres:\/\/postgres:\*\*\*@.*password=\*\*\*/)
  }, 240_000)
})
