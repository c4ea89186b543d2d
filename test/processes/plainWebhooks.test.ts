/**
 * `fair-relay run --http` (the bundled CLI, a child process) against a plain Node HTTP server
 * with no fair-relay code in it: what every webhook consumer answers (200, 204, 503 then 200, 429
 * with Retry-After, 400, 410) is read by its status, and every delivery is verified by the
 * `standardwebhooks` reference library with the second of the two secrets the worker signs with
 * (a rotation in progress).
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { Webhook } from "standardwebhooks"
import { afterAll, describe, expect, it } from "vitest"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { bin, tempDir } from "../cli/support.js"

const dir = tempDir("webhooks")
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

const oldSecret = `whsec_${Buffer.alloc(32, 0x11).toString("base64")}`
const newSecret = `whsec_${Buffer.alloc(32, 0x22).toString("base64")}`

/** One request as the receiver saw it. */
interface Seen {
  readonly at: number
  readonly webhookId: string
  readonly eventId: string
  readonly flowId: string
  readonly seq: number
  readonly status: number
}

/** How each flow's endpoint answers the `attempt`-th request (1-based) for one webhook-id. */
const behaviour: Record<string, (attempt: number) => { readonly status: number; readonly headers?: Record<string, string>; readonly body?: string }> = {
  ok: () => ({ status: 200, headers: { "content-type": "application/json" }, body: `{"ok":true}` }),
  empty: () => ({ status: 204 }),
  unavailable: (attempt) => (attempt === 1 ? { status: 503, body: "Service Unavailable" } : { status: 200, body: "OK" }),
  limited: (attempt) => (attempt === 1 ? { status: 429, headers: { "retry-after": "2" } } : { status: 200 }),
  bad: () => ({ status: 400, headers: { "content-type": "application/json" }, body: `{"error":"bad payload"}` }),
  gone: () => ({ status: 410, body: "Gone" })
}

/** A plain webhook consumer: verifies with `standardwebhooks`, then answers by its flow's behaviour. */
const receiver = async () => {
  const seen: Array<Seen> = []
  const unverified: Array<string> = []
  const attempts = new Map<string, number>()
  const webhook = new Webhook(newSecret)
  const server = http.createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8")
      let payload: { eventId: string; flowId: string; seq: number }
      try {
        payload = webhook.verify(body, request.headers as Record<string, string>) as typeof payload
      } catch (error) {
        unverified.push(String(error))
        response.writeHead(401).end()
        return
      }
      const webhookId = String(request.headers["webhook-id"])
      const attempt = (attempts.get(webhookId) ?? 0) + 1
      attempts.set(webhookId, attempt)
      const answer = behaviour[payload.flowId]!(attempt)
      seen.push({ at: Date.now(), webhookId, eventId: payload.eventId, flowId: payload.flowId, seq: payload.seq, status: answer.status })
      response.writeHead(answer.status, answer.headers ?? {}).end(answer.body ?? "")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return { url: `http://127.0.0.1:${port}/hooks`, seen, unverified, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

const flows = Object.keys(behaviour)

describe("fair-relay run --http against a plain webhook endpoint", () => {
  it("200 and 204 ack; 503 then 200 acks on the second attempt with the same webhook-id; 429 Retry-After: 2 waits 2 s; 400 and 410 quarantine after one attempt; order kept; all verified", async () => {
    const db = path.join(dir, "queue.db")
    // A short backoff, so that only Retry-After can explain a wait of 2 s.
    await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
      const queue = yield* SqliteRelayQueue.make({ filename: db, policy: { leaseTicks: "30 seconds", backoffBase: "100 millis", backoffCap: "10 seconds" } })
      for (const flowId of flows) {
        for (let n = 1; n <= 3; n++) yield* queue.enqueue({ eventId: `${flowId}-${n}`, flowId, body: { n } })
      }
    })))
    const endpoint = await receiver()
    try {
      const ran = await bin(["run", "--db", db, "--http", endpoint.url, "--workers", "3", "--poll", "100 millis", "--until-idle", "--json"], {
        env: { FAIR_RELAY_WEBHOOK_SECRET: `${oldSecret} ${newSecret}` },
        timeoutMillis: 90_000
      })
      expect(ran.code, ran.stderr).toBe(0)
      expect(endpoint.unverified).toEqual([])

      const summary = JSON.parse(ran.stdout) as { outcomes: Record<string, number>; stats: { byState: Record<string, number> } }
      // 4 flows × 3 acked; 2 flows quarantined at their head, 2 events each left behind it.
      expect(summary.stats.byState).toEqual({ ready: 4, inflight: 0, acked: 12, quarantined: 2, discarded: 0 })
      expect(summary.outcomes).toEqual({ Acked: 12, RetryScheduled: 6, Quarantined: 2 })

      const of = (flowId: string) => endpoint.seen.filter((s) => s.flowId === flowId)
      // Per-flow order: each flow's requests in seq order, no event before its predecessor's ack.
      for (const [flowId, status] of [["ok", 200], ["empty", 204]] as const) {
        expect(of(flowId).map((s) => [s.eventId, s.status])).toEqual([[`${flowId}-1`, status], [`${flowId}-2`, status], [`${flowId}-3`, status]])
      }
      expect(of("unavailable").map((s) => [s.eventId, s.status])).toEqual([
        ["unavailable-1", 503], ["unavailable-1", 200], ["unavailable-2", 503], ["unavailable-2", 200], ["unavailable-3", 503], ["unavailable-3", 200]
      ])
      expect(of("limited").map((s) => [s.eventId, s.status])).toEqual([
        ["limited-1", 429], ["limited-1", 200], ["limited-2", 429], ["limited-2", 200], ["limited-3", 429], ["limited-3", 200]
      ])
      // The retry carries the same webhook-id as the first attempt: the event id.
      for (const flowId of ["unavailable", "limited"]) {
        const requests = of(flowId)
        for (let i = 0; i < requests.length; i += 2) {
          expect(requests[i + 1]!.webhookId).toBe(requests[i]!.webhookId)
          expect(requests[i]!.webhookId).toBe(requests[i]!.eventId)
        }
      }
      // Retry-After: 2 is the least delay: no second attempt sooner than 2 s after the 429.
      const limited = of("limited")
      for (let i = 0; i < limited.length; i += 2) expect(limited[i + 1]!.at - limited[i]!.at).toBeGreaterThanOrEqual(2_000)
      // A 400 and a 410 quarantine their head after one attempt; what is behind it is never sent.
      expect(of("bad").map((s) => [s.eventId, s.status])).toEqual([["bad-1", 400]])
      expect(of("gone").map((s) => [s.eventId, s.status])).toEqual([["gone-1", 410]])

      const events = await Effect.runPromise(Effect.scoped(Effect.flatMap(SqliteRelayQueue.make({ filename: db }), (queue) => queue.snapshot)))
      const quarantined = events.events.filter((e) => e.state === "quarantined").map((e) => [e.eventId, e.reason, e.attempts])
      expect(quarantined.sort()).toEqual([["bad-1", "http_400", 1], ["gone-1", "http_410", 1]])
    } finally {
      await endpoint.close()
    }
  }, 120_000)
})
