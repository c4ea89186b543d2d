/**
 * The bin's worker and the rest of its surface: `run --http` against a real HTTP endpoint,
 * `run` stopped by SIGTERM (a graceful shutdown, its summary, exit 143), `--help`, `--version`, and `demo`.
 */
import { Effect } from "effect"
import { afterAll, describe, expect, it } from "vitest"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { bin, lines, Parallel, pool, repositoryRoot, tempDir } from "./support.js"

const dir = tempDir("run")
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

const enqueued = (file: string, events: ReadonlyArray<readonly [string, string, number]>) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const queue = yield* SqliteRelayQueue.make({ filename: file })
    for (const [eventId, flowId, delta] of events) yield* queue.enqueue({ eventId, flowId, body: { delta } })
  })))

const secret = `whsec_${Buffer.alloc(32, 0x33).toString("base64")}`

/** An HTTP receiver that accepts every delivery and records it (and its signature header). */
const receiver = async () => {
  const received: Array<{ eventId: string; flowId: string; seq: number }> = []
  const signatures: Array<string | undefined> = []
  const server = http.createServer((request, response) => {
    let body = ""
    request.setEncoding("utf8").on("data", (chunk: string) => (body += chunk))
    request.on("end", () => {
      const delivery = JSON.parse(body) as { eventId: string; flowId: string; seq: number }
      received.push({ eventId: delivery.eventId, flowId: delivery.flowId, seq: delivery.seq })
      signatures.push(request.headers["webhook-signature"] as string | undefined)
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ _tag: "Accepted" }))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return { url: `http://127.0.0.1:${port}/deliveries`, received, signatures, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

describe("fair-relay run, help, version and demo", () => {
  it("run --http delivers every event to the endpoint in flow order and exits once idle (--retry-log-interval taken)", async () => {
    const db = path.join(dir, "http.db")
    await enqueued(db, [["A1", "A", 1], ["A2", "A", 2], ["B1", "B", 3], ["C1", "C", 4], ["A3", "A", 5]])
    const endpoint = await receiver()
    try {
      const ran = await bin(["run", "--db", db, "--http", endpoint.url, "--workers", "2", "--batch", "2", "--retry-log-interval", "1s", "--until-idle", "--json"], {
        env: { FAIR_RELAY_WEBHOOK_SECRET: secret }
      })
      expect(ran.code, ran.stderr).toBe(0)
      const summary = JSON.parse(ran.stdout) as { outcomes: Record<string, number>; stats: { byState: Record<string, number> } }
      expect(summary.outcomes).toEqual({ Acked: 5 })
      expect(summary.stats.byState).toEqual({ ready: 0, inflight: 0, acked: 5, quarantined: 0, discarded: 0 })
      expect(endpoint.received.filter((d) => d.flowId === "A").map((d) => d.eventId)).toEqual(["A1", "A2", "A3"])
      expect(endpoint.received.map((d) => d.eventId).sort()).toEqual(["A1", "A2", "A3", "B1", "C1"])
    } finally {
      await endpoint.close()
    }
  }, 120_000)

  it("run --http refuses to start without FAIR_RELAY_WEBHOOK_SECRET unless --unsigned, and with a malformed secret", async () => {
    const db = path.join(dir, "unsigned.db")
    await enqueued(db, [["A1", "A", 1]])
    const endpoint = await receiver()
    try {
      const missing = await bin(["run", "--db", db, "--http", endpoint.url, "--until-idle"], { env: { FAIR_RELAY_WEBHOOK_SECRET: "" } })
      expect(missing.code).toBe(2)
      expect(missing.stderr).toMatch(/set FAIR_RELAY_WEBHOOK_SECRET .* or pass --unsigned \(MissingWebhookSecret\)/)
      const malformed = await bin(["run", "--db", db, "--http", endpoint.url, "--until-idle"], { env: { FAIR_RELAY_WEBHOOK_SECRET: "hunter2" } })
      expect(malformed.code).toBe(2)
      expect(malformed.stderr).toMatch(/\(InvalidWebhookSecret\)/)
      expect(malformed.stderr).not.toContain("hunter2")
      expect(endpoint.received).toEqual([])
      const unsigned = await bin(["run", "--db", db, "--http", endpoint.url, "--unsigned", "--until-idle", "--json"], {
        env: { FAIR_RELAY_WEBHOOK_SECRET: "" }
      })
      expect(unsigned.code, unsigned.stderr).toBe(0)
      expect(endpoint.received.map((d) => d.eventId)).toEqual(["A1"])
      expect(endpoint.signatures).toEqual([undefined])
    } finally {
      await endpoint.close()
    }
  }, 120_000)

  it("run stops gracefully on SIGTERM: the summary, then exit 143", async () => {
    const db = path.join(dir, "signal.db")
    await enqueued(db, [["A1", "A", 1]])
    // Stopped once it has delivered A1 (the line is printed after the settle commits).
    const { code, stderr, stdout } = await bin(["run", "--db", db, "--inbox", path.join(dir, "signal-inbox.db")], {
      timeoutMillis: 60_000,
      started: (child) => {
        let seen = ""
        child.stdout!.on("data", (chunk: string) => {
          seen += chunk
          if (/A1 {2}generation 1 {2}Accepted → Acked/.test(seen)) child.kill("SIGTERM")
        })
      }
    })
    expect(code, stderr).toBe(143)
    expect(stdout).toMatch(/^stopped by SIGTERM: 1 Acked; queue now 0 ready, 0 inflight, 1 acked, 0 quarantined, 0 discarded$/m)
  }, 120_000)

  it("--help on the root and on commands, --version, usage errors, and demo", async () => {
    const [rootHelp, redriveHelp, runHelp, version, unknown, demo] = await pool(Parallel, [
      () => bin(["--help"]),
      () => bin(["redrive", "--help"]),
      () => bin(["run", "--help"]),
      () => bin(["--version"]),
      () => bin(["bogus"]),
      () => bin(["demo", "--only", "round_robin"], { timeoutMillis: 90_000 })
    ])
    const plain = (text: string) => text.replace(/\u001b\[[0-9;]*m/g, "")
    expect(rootHelp!.code).toBe(0)
    for (const command of ["status", "flows", "events", "show", "redrive", "audit", "enqueue", "clock", "run", "demo"]) {
      expect(plain(rootHelp!.stdout)).toMatch(new RegExp(`^ {2}${command} +[A-Z]`, "m"))
    }
    expect(redriveHelp!.code).toBe(0)
    expect(plain(redriveHelp!.stdout).replace(/\s+/g, " ")).toContain("$ fair-relay redrive [--db DB] [--json] --generation N --reason TEXT [--by WHO] <EVENT>")
    expect(runHelp!.code).toBe(0)
    expect(plain(runHelp!.stdout)).toContain("--until-idle")
    expect(version!.code).toBe(0)
    const manifest = JSON.parse(fs.readFileSync(path.join(repositoryRoot, "package.json"), "utf8")) as { version: string }
    expect(version!.stdout.trim()).toBe(manifest.version)
    expect(unknown!.code).toBe(2)
    expect(lines(unknown!.stderr)).toEqual([expect.stringContaining("Invalid subcommand")])
    expect(demo!.code, demo!.stderr).toBe(0)
    expect(demo!.stdout).toMatch(/^PASS +1 round_robin/m)
    expect(demo!.stdout).toContain("1 passed, 0 failed")
  }, 180_000)
})
