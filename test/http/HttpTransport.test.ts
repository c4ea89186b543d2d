/**
 * The HTTP transport against scripted receivers on a real loopback socket: what it sends, and
 * how every kind of answer (or lack of one) becomes a reply. Nothing that is not a receiver's
 * explicit ack may ever come back as `Accepted`/`Duplicate`. Runs with both Node clients and fetch.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import type * as HttpClient from "@effect/platform/HttpClient"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import type { DurationInput } from "effect/Duration"
import * as HttpTransport from "../../src/http/HttpTransport.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { Relay } from "../../src/services/Relay.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import type { DeliveryReply } from "../../src/domain/Outcomes.js"
import type { DeliveryInput } from "../../src/domain/Records.js"
import { answer, closedPort, scripted } from "./scripted.js"
import type { Script } from "./scripted.js"

const delivery: DeliveryInput = { eventId: "evt-A1", flowId: "A", seq: 1, body: { delta: 7, note: "héllo" } }

const clients: ReadonlyArray<readonly [string, Layer.Layer<HttpClient.HttpClient>]> = [
  ["undici", NodeHttpClient.layerUndici],
  ["node:http", NodeHttpClient.layer],
  ["fetch", FetchHttpClient.layer]
]

describe("HttpTransport.replyOf (the status/body mapping, without a socket)", () => {
  const cases: ReadonlyArray<readonly [number, string, DeliveryReply]> = [
    [200, `{"_tag":"Accepted"}`, { _tag: "Accepted" }],
    [201, `{"_tag":"Duplicate","extra":true}`, { _tag: "Duplicate" }],
    [200, `{"_tag":"Gap","expected":3}`, { _tag: "Gap", expected: 3 }],
    [200, `{"_tag":"Retry","reason":"busy"}`, { _tag: "Retry", reason: "busy" }],
    [200, `{"_tag":"Bogus"}`, { _tag: "Retry", reason: `unrecognised reply: http 200: {"_tag":"Bogus"}` }],
    [200, `{"_tag":"Gap","expected":0}`, { _tag: "Retry", reason: `unrecognised reply: http 200: {"_tag":"Gap","expected":0}` }],
    [200, "", { _tag: "Retry", reason: "unrecognised reply: http 200" }],
    [204, "", { _tag: "Retry", reason: "unrecognised reply: http 204" }],
    [409, `{"_tag":"IdConflict"}`, { _tag: "IdConflict" }],
    [422, `{"_tag":"Rejected","code":"unsupported_delta"}`, { _tag: "Rejected", code: "unsupported_delta" }],
    [404, `{"_tag":"Accepted"}`, { _tag: "Retry", reason: `http 404: {"_tag":"Accepted"}` }],
    [429, `{"_tag":"Rejected","code":"x"}`, { _tag: "Retry", reason: `http 429: {"_tag":"Rejected","code":"x"}` }],
    [404, "Not Found", { _tag: "Retry", reason: "http 404: Not Found" }],
    [400, `{"error":"invalid_delivery","message":"seq must be positive"}`, { _tag: "Retry", reason: "http 400: invalid_delivery: seq must be positive" }],
    [503, `{"_tag":"Retry","reason":"draining"}`, { _tag: "Retry", reason: "http 503: draining" }],
    [500, `{"_tag":"Accepted"}`, { _tag: "Retry", reason: `http 500: {"_tag":"Accepted"}` }],
    [302, "", { _tag: "Retry", reason: "http 302" }]
  ]
  it.each(cases)("http %i with %j → %j", (status, body, expected) => {
    expect(HttpTransport.replyOf(status, body)).toEqual(expected)
  })

  it("quotes at most MaxReasonExcerpt characters of a body, on one line", () => {
    const reply = HttpTransport.replyOf(500, `line one\nline two\r\n${"x".repeat(1000)}`)
    expect(reply._tag).toBe("Retry")
    const reason = reply._tag === "Retry" ? reply.reason : ""
    expect(reason).not.toMatch(/[\r\n]/)
    expect(reason.startsWith("http 500: line one line two xxx")).toBe(true)
    expect(reason.length).toBeLessThanOrEqual("http 500: ".length + HttpTransport.MaxReasonExcerpt + 1)
  })
})

describe("HttpTransport.make", () => {
  it.effect("refuses a URL or timeout that cannot work, before any delivery", () =>
    Effect.gen(function*() {
      const attempts: ReadonlyArray<HttpTransport.HttpTransportOptions> = [
        { url: "not a url" },
        { url: "ftp://127.0.0.1/deliveries" },
        { url: "http://127.0.0.1/deliveries", timeout: 0 },
        { url: "http://127.0.0.1/deliveries", timeout: Duration.infinity }
      ]
      for (const options of attempts) {
        const error = yield* Effect.flip(HttpTransport.make(options))
        expect(error._tag).toBe("InvalidInput")
        expect(error.operation).toBe("HttpTransport.make")
      }
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))
})

for (const [clientName, clientLayer] of clients) {
  describe(`HttpTransport over a loopback socket (${clientName} client)`, () => {
    const deliverTo = (
      url: string,
      options: { readonly timeout?: DurationInput; readonly headers?: Record<string, string> } = {},
      input: DeliveryInput = delivery
    ) =>
      Effect.flatMap(HttpTransport.make({ url, ...options }), (transport) => transport.deliver(input)).pipe(
        Effect.provide(clientLayer)
      )

    const replyTo = (script: Script, options?: { readonly timeout?: DurationInput }) =>
      Effect.flatMap(scripted(script), (server) => deliverTo(server.url, options))

    it.scopedLive("POSTs the event id, flow, seq and body as JSON, with the event id as Idempotency-Key", () =>
      Effect.gen(function*() {
        const server = yield* scripted(answer(200, `{"_tag":"Accepted"}`))
        const reply = yield* deliverTo(server.url, { headers: { authorization: "Bearer t0ken", "idempotency-key": "spoofed" } })
        expect(reply).toEqual({ _tag: "Accepted" })
        expect(server.requests).toHaveLength(1)
        const [request] = server.requests
        expect(request!.method).toBe("POST")
        expect(request!.url).toBe("/deliveries")
        expect(request!.headers["idempotency-key"]).toBe("evt-A1")
        expect(request!.headers["content-type"]).toMatch(/^application\/json/)
        expect(request!.headers["authorization"]).toBe("Bearer t0ken")
        expect(JSON.parse(request!.body)).toEqual({ eventId: "evt-A1", flowId: "A", seq: 1, body: { delta: 7, note: "héllo" } })
      }))

    it.scopedLive("passes every protocol reply of a 2xx through unchanged", () =>
      Effect.gen(function*() {
        const replies: ReadonlyArray<DeliveryReply> = [
          { _tag: "Accepted" },
          { _tag: "Duplicate" },
          { _tag: "IdConflict" },
          { _tag: "SequenceConflict" },
          { _tag: "Rejected", code: "unsupported_delta" },
          { _tag: "Retry", reason: "receiver busy" },
          { _tag: "Gap", expected: 4 }
        ]
        for (const reply of replies) {
          expect(yield* replyTo(answer(200, JSON.stringify(reply)))).toEqual(reply)
        }
      }))

    it.scopedLive("a 503 is a Retry naming the status", () =>
      Effect.gen(function*() {
        expect(yield* replyTo(answer(503, "Service Unavailable", { "content-type": "text/plain" }))).toEqual({
          _tag: "Retry",
          reason: "http 503: Service Unavailable"
        })
      }))

    it.scopedLive("garbage in a 200 is a Retry quoting it, never an ack", () =>
      Effect.gen(function*() {
        expect(yield* replyTo(answer(200, "<html>oops</html>", { "content-type": "text/html" }))).toEqual({
          _tag: "Retry",
          reason: "unrecognised reply: http 200: <html>oops</html>"
        })
        expect(yield* replyTo(answer(200, `{"_tag":"Accepted"`))).toEqual({
          _tag: "Retry",
          reason: `unrecognised reply: http 200: {"_tag":"Accepted"`
        })
      }))

    it.scopedLive("an unknown tag in a 200 is a Retry quoting it", () =>
      Effect.gen(function*() {
        expect(yield* replyTo(answer(200, `{"_tag":"Bogus"}`))).toEqual({
          _tag: "Retry",
          reason: `unrecognised reply: http 200: {"_tag":"Bogus"}`
        })
      }))

    it.scopedLive("a 4xx carrying a refusal is that refusal; a 4xx carrying an ack is not trusted", () =>
      Effect.gen(function*() {
        expect(yield* replyTo(answer(409, `{"_tag":"IdConflict"}`))).toEqual({ _tag: "IdConflict" })
        expect(yield* replyTo(answer(404, `{"_tag":"Accepted"}`))).toEqual({ _tag: "Retry", reason: `http 404: {"_tag":"Accepted"}` })
        expect(yield* replyTo(answer(404, "no such route", { "content-type": "text/plain" }))).toEqual({
          _tag: "Retry",
          reason: "http 404: no such route"
        })
      }))

    it.scopedLive("a redirect is not followed: Retry naming the status", () =>
      Effect.gen(function*() {
        const server = yield* scripted(answer(307, "", { location: "http://127.0.0.1:9/elsewhere" }))
        expect(yield* deliverTo(server.url)).toEqual({ _tag: "Retry", reason: "http 307" })
        expect(server.requests).toHaveLength(1)
      }))

    it.scopedLive("a receiver that never answers is a Retry after the timeout", () =>
      Effect.gen(function*() {
        const server = yield* scripted(() => {})
        const started = Date.now()
        const reply = yield* deliverTo(server.url, { timeout: "200 millis" })
        const elapsed = Date.now() - started
        expect(reply).toEqual({ _tag: "Retry", reason: "timeout after 200ms" })
        expect(elapsed).toBeGreaterThanOrEqual(150)
        expect(elapsed).toBeLessThan(5_000)
        expect(server.requests).toHaveLength(1)
      }))

    it.scopedLive("a reply that starts and then stalls is a Retry after the timeout (the body counts)", () =>
      Effect.gen(function*() {
        const reply = yield* replyTo((_request, response) => {
          response.writeHead(200, { "content-type": "application/json", "content-length": "100" })
          response.write(`{"_tag":"Acc`)
        }, { timeout: "300 millis" })
        expect(reply).toEqual({ _tag: "Retry", reason: "timeout after 300ms" })
      }))

    it.scopedLive("a socket closed before any reply is a Retry from the transport", () =>
      Effect.gen(function*() {
        const reply = yield* replyTo((_request, _response, socket) => socket.destroy())
        expect(reply._tag).toBe("Retry")
        expect(reply._tag === "Retry" && reply.reason).toMatch(/^transport: /)
      }))

    it.scopedLive("a socket closed in the middle of the reply body is a Retry from the transport", () =>
      Effect.gen(function*() {
        const reply = yield* replyTo((_request, response, socket) => {
          response.writeHead(200, { "content-type": "application/json", "content-length": "100" })
          response.write(`{"_tag":"Accepted"`, () => socket.destroy())
        })
        expect(reply._tag).toBe("Retry")
        expect(reply._tag === "Retry" && reply.reason).toMatch(/^transport: /)
      }))

    it.scopedLive("a refused connection is a Retry from the transport", () =>
      Effect.gen(function*() {
        const url = yield* closedPort
        const reply = yield* deliverTo(url, { timeout: "5 seconds" })
        expect(reply._tag).toBe("Retry")
        expect(reply._tag === "Retry" && reply.reason).toMatch(/^transport: .*ECONNREFUSED/)
      }))

    it.scopedLive("a body that is not JSON-encodable is a Retry that never reaches the receiver", () =>
      Effect.gen(function*() {
        const server = yield* scripted(answer(200, `{"_tag":"Accepted"}`))
        const reply = yield* deliverTo(server.url, {}, { ...delivery, body: { delta: BigInt(1) } })
        expect(reply._tag).toBe("Retry")
        expect(reply._tag === "Retry" && reply.reason).toMatch(/^encode: /)
        expect(server.requests).toHaveLength(0)
      }))
  })
}

describe("HttpTransport under a relay", () => {
  it.scopedLive("an unrecognised reply is retried within the budget and then quarantined, never acked", () =>
    Effect.gen(function*() {
      const server = yield* scripted(answer(200, `{"_tag":"Bogus"}`))
      const layer = Relay.layer.pipe(
        Layer.provideMerge(SqliteRelayQueue.layer({ filename: ":memory:", policy: { leaseTicks: 60_000, retryBudget: 3, backoffBase: 0, backoffCap: 0 } })),
        Layer.provide(HttpTransport.layer({ url: server.url, timeout: "5 seconds" })),
        Layer.provide(NodeHttpClient.layerUndici)
      )
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        const relay = yield* Relay
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        const outcomes: Array<string> = []
        for (let i = 0; i < 3; i++) {
          const step = yield* relay.step
          expect(step._tag).toBe("Delivered")
          if (step._tag === "Delivered") {
            expect(step.reply).toEqual({ _tag: "Retry", reason: `unrecognised reply: http 200: {"_tag":"Bogus"}` })
            outcomes.push(step.outcome._tag)
          }
        }
        expect(outcomes).toEqual(["RetryScheduled", "RetryScheduled", "Quarantined"])
        expect((yield* relay.step)._tag).toBe("Idle")
        const [event] = (yield* queue.snapshot).events
        expect(event!.state).toBe("quarantined")
        expect(event!.reason).toContain("unrecognised reply")
        expect(server.requests.map((r) => r.headers["idempotency-key"])).toEqual(["A1", "A1", "A1"])
      }).pipe(Effect.provide(layer))
    }))
})
