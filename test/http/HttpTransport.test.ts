/**
 * The HTTP transport against scripted receivers on a real loopback socket: what it sends (signed
 * as Standard Webhooks, checked with the `standardwebhooks` package), and how every kind of answer
 * (or lack of one) becomes a reply: a plain endpoint by its status, a fair-relay receiver by its
 * reply document. Nothing but a 2xx or a receiver's explicit ack may ever come back as
 * `Accepted`/`Duplicate`. Runs with both Node clients and fetch.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import type * as HttpClient from "@effect/platform/HttpClient"
import { describe, expect, it } from "@effect/vitest"
import { Config, ConfigProvider, Duration, Effect, Layer, Redacted } from "effect"
import type { DurationInput } from "effect/Duration"
import * as HttpTransport from "../../src/http/HttpTransport.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { Relay } from "../../src/services/Relay.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import type { DeliveryReply } from "../../src/domain/Outcomes.js"
import type { DeliveryInput } from "../../src/domain/Records.js"
import { CutMarker, MaxKeptReasonBytes as MaxStoredReasonBytes } from "../../src/domain/Operator.js"
import { Transport } from "../../src/services/Transport.js"
import { Webhook, WebhookVerificationError } from "standardwebhooks"
import { answer, answerReply, closedPort, scripted } from "./scripted.js"
import type { Recorded } from "./scripted.js"
import type { Script } from "./scripted.js"
import { OtherSecret, TestSecret } from "./signing.js"

/** A recorded request's headers as `standardwebhooks` reads them. */
const headersOf = (request: Recorded): Record<string, string> =>
  Object.fromEntries(Object.entries(request.headers).flatMap(([name, value]) => (typeof value === "string" ? [[name, value]] : [])))

const delivery: DeliveryInput = { eventId: "evt-A1", flowId: "A", seq: 1, body: { delta: 7, note: "héllo" } }

const clients: ReadonlyArray<readonly [string, Layer.Layer<HttpClient.HttpClient>]> = [
  ["undici", NodeHttpClient.layerUndici],
  ["node:http", NodeHttpClient.layer],
  ["fetch", FetchHttpClient.layer]
]

const media = { "content-type": HttpTransport.ReplyMediaType }

describe("HttpTransport.replyOf: a plain endpoint is read by its status", () => {
  const cases: ReadonlyArray<readonly [number, string, DeliveryReply]> = [
    [200, `{"ok":true}`, { _tag: "Accepted" }],
    [200, "", { _tag: "Accepted" }],
    [201, "<html>created</html>", { _tag: "Accepted" }],
    [204, "", { _tag: "Accepted" }],
    // Without the fair-relay media type a body is not read for a decision, whatever it says.
    [200, `{"_tag":"Retry","reason":"busy"}`, { _tag: "Accepted" }],
    [408, "", { _tag: "Retry", reason: "http 408" }],
    [425, "", { _tag: "Retry", reason: "http 425" }],
    [429, "slow down", { _tag: "Retry", reason: "http 429: slow down" }],
    [500, "", { _tag: "Retry", reason: "http 500" }],
    [503, "Service Unavailable", { _tag: "Retry", reason: "http 503: Service Unavailable" }],
    [400, `{"error":"invalid_delivery","message":"seq must be positive"}`, { _tag: "Rejected", code: "http_400" }],
    [401, "", { _tag: "Rejected", code: "http_401" }],
    [404, "Not Found", { _tag: "Rejected", code: "http_404" }],
    [410, "", { _tag: "Rejected", code: "http_410" }],
    [422, "", { _tag: "Rejected", code: "http_422" }],
    [302, "", { _tag: "Rejected", code: "http_302" }],
    [307, "", { _tag: "Rejected", code: "http_307" }],
    [102, "", { _tag: "Retry", reason: "http 102" }],
    [600, "", { _tag: "Retry", reason: "http 600" }]
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

describe("HttpTransport.replyOf: Retry-After is the least delay, in milliseconds", () => {
  const now = Date.UTC(2026, 0, 15, 12, 0, 0)
  it("in seconds", () => {
    expect(HttpTransport.replyOf(429, "", { "retry-after": "2" }, now)).toEqual({ _tag: "Retry", reason: "http 429", retryAfter: 2_000 })
    expect(HttpTransport.replyOf(503, "", { "retry-after": " 0 " }, now)).toEqual({ _tag: "Retry", reason: "http 503", retryAfter: 0 })
  })

  it("as an HTTP date, from the time the reply was read; a past date is no delay", () => {
    expect(HttpTransport.replyOf(503, "", { "retry-after": "Thu, 15 Jan 2026 12:01:30 GMT" }, now)).toEqual({
      _tag: "Retry",
      reason: "http 503",
      retryAfter: 90_000
    })
    expect(HttpTransport.replyOf(503, "", { "retry-after": "Thu, 15 Jan 2026 11:00:00 GMT" }, now)).toEqual({
      _tag: "Retry",
      reason: "http 503",
      retryAfter: 0
    })
  })

  it("unreadable, negative or fractional: ignored, the policy's backoff decides", () => {
    for (const value of ["soon", "-5", "1.5", "", "2026-01-15", "12:00"]) {
      expect(HttpTransport.replyOf(429, "", { "retry-after": value }, now), value).toEqual({ _tag: "Retry", reason: "http 429" })
    }
  })

  it("is not attached to a refusal or an ack", () => {
    expect(HttpTransport.replyOf(400, "", { "retry-after": "2" }, now)).toEqual({ _tag: "Rejected", code: "http_400" })
    expect(HttpTransport.replyOf(200, "", { "retry-after": "2" }, now)).toEqual({ _tag: "Accepted" })
  })

  it("joins a fair-relay Retry that names no delay of its own", () => {
    expect(HttpTransport.replyOf(200, `{"_tag":"Retry","reason":"busy"}`, { ...media, "retry-after": "3" }, now)).toEqual({
      _tag: "Retry",
      reason: "busy",
      retryAfter: 3_000
    })
    expect(HttpTransport.replyOf(200, `{"_tag":"Retry","reason":"busy","retryAfter":500}`, { ...media, "retry-after": "3" }, now)).toEqual({
      _tag: "Retry",
      reason: "busy",
      retryAfter: 500
    })
  })
})

describe("HttpTransport.replyOf: a receiver that answers in the fair-relay reply media type is read for its decision", () => {
  const cases: ReadonlyArray<readonly [number, string, DeliveryReply]> = [
    [200, `{"_tag":"Accepted"}`, { _tag: "Accepted" }],
    [201, `{"_tag":"Duplicate","extra":true}`, { _tag: "Duplicate" }],
    [200, `{"_tag":"Gap","expected":3}`, { _tag: "Gap", expected: 3 }],
    [200, `{"_tag":"Retry","reason":"busy"}`, { _tag: "Retry", reason: "busy" }],
    [200, `{"_tag":"Rejected","code":"unsupported_delta"}`, { _tag: "Rejected", code: "unsupported_delta" }],
    [200, `{"_tag":"Bogus"}`, { _tag: "Retry", reason: `unrecognised reply: http 200: {"_tag":"Bogus"}` }],
    [200, `{"_tag":"Gap","expected":0}`, { _tag: "Retry", reason: `unrecognised reply: http 200: {"_tag":"Gap","expected":0}` }],
    [200, "", { _tag: "Retry", reason: "unrecognised reply: http 200" }],
    [409, `{"_tag":"IdConflict"}`, { _tag: "IdConflict" }],
    [422, `{"_tag":"Rejected","code":"unsupported_delta"}`, { _tag: "Rejected", code: "unsupported_delta" }],
    [404, `{"_tag":"Accepted"}`, { _tag: "Retry", reason: `http 404: {"_tag":"Accepted"}` }],
    [429, `{"_tag":"Rejected","code":"x"}`, { _tag: "Retry", reason: `http 429: {"_tag":"Rejected","code":"x"}` }],
    [503, `{"_tag":"Retry","reason":"draining"}`, { _tag: "Retry", reason: "http 503: draining" }],
    [500, `{"_tag":"Accepted"}`, { _tag: "Retry", reason: `http 500: {"_tag":"Accepted"}` }]
  ]
  it.each(cases)("http %i with %j → %j", (status, body, expected) => {
    expect(HttpTransport.replyOf(status, body, media)).toEqual(expected)
    expect(HttpTransport.replyOf(status, body, { "content-type": `${HttpTransport.ReplyMediaType}; charset=utf-8` })).toEqual(expected)
  })
})

describe("HttpTransport.make", () => {
  it.effect("refuses a URL or timeout that cannot work, before any delivery", () =>
    Effect.gen(function*() {
      const attempts: ReadonlyArray<HttpTransport.HttpTransportOptions> = [
        { url: "not a url", secrets: TestSecret },
        { url: "ftp://127.0.0.1/deliveries", secrets: TestSecret },
        { url: "http://127.0.0.1/deliveries", secrets: TestSecret, timeout: 0 },
        { url: "http://127.0.0.1/deliveries", secrets: TestSecret, timeout: Duration.infinity }
      ]
      for (const options of attempts) {
        const error = yield* Effect.flip(HttpTransport.make(options))
        expect(error._tag).toBe("InvalidInput")
        expect(error.operation).toBe("HttpTransport.make")
      }
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.effect("refuses to start without a secret unless told unsigned: true, and a secret that is not whsec_ base64", () =>
    Effect.gen(function*() {
      const url = "http://127.0.0.1:9/deliveries"
      expect(yield* Effect.flip(HttpTransport.make({ url }))).toMatchObject({ _tag: "MissingWebhookSecret", operation: "HttpTransport.make" })
      expect(yield* Effect.flip(HttpTransport.make({ url, secrets: " " }))).toMatchObject({ _tag: "MissingWebhookSecret" })
      for (const secrets of ["s3cret", "whsec_", "whsec_!!!!", `${TestSecret} s3cret`]) {
        const error = yield* Effect.flip(HttpTransport.make({ url, secrets }))
        expect(error).toMatchObject({ _tag: "InvalidWebhookSecret" })
        expect(error.message).not.toContain("s3cret")
      }
      expect(yield* Effect.flip(HttpTransport.make({ url, secrets: TestSecret, unsigned: true }))).toMatchObject({ _tag: "InvalidWebhookSecret" })
      yield* HttpTransport.make({ url, unsigned: true })
      yield* HttpTransport.make({ url, secrets: [TestSecret, Redacted.make(OtherSecret)] })
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.effect("layerConfig reads the secrets from configuration, redacted", () =>
    Effect.gen(function*() {
      const transport = yield* Transport.pipe(
        Effect.provide(HttpTransport.layerConfig({
          url: Config.succeed("http://127.0.0.1:9/deliveries"),
          secrets: HttpTransport.configSecrets("WEBHOOK_SECRET")
        })),
        Effect.provide(NodeHttpClient.layerUndici),
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["WEBHOOK_SECRET", `${TestSecret} ${OtherSecret}`]])))
      )
      expect(typeof transport.deliver).toBe("function")
      const missing = yield* Effect.flip(Transport.pipe(
        Effect.provide(HttpTransport.layerConfig({ url: Config.succeed("http://127.0.0.1:9/deliveries"), secrets: HttpTransport.configSecrets("WEBHOOK_SECRET") })),
        Effect.provide(NodeHttpClient.layerUndici),
        Effect.withConfigProvider(ConfigProvider.fromMap(new Map()))
      ))
      expect(missing._tag).toBe("ConfigError")
    }))
})

for (const [clientName, clientLayer] of clients) {
  describe(`HttpTransport over a loopback socket (${clientName} client)`, () => {
    const deliverTo = (
      url: string,
      options: { readonly timeout?: DurationInput; readonly headers?: Record<string, string> } = {},
      input: DeliveryInput = delivery
    ) =>
      Effect.flatMap(HttpTransport.make({ url, secrets: TestSecret, ...options }), (transport) => transport.deliver(input)).pipe(
        Effect.provide(clientLayer)
      )

    const replyTo = (script: Script, options?: { readonly timeout?: DurationInput }) =>
      Effect.flatMap(scripted(script), (server) => deliverTo(server.url, options))

    it.scopedLive("POSTs the event id, flow, seq and body as JSON, signed, with the event id as webhook-id and Idempotency-Key", () =>
      Effect.gen(function*() {
        const server = yield* scripted(answer(200, `{"ok":true}`))
        const before = Math.floor(Date.now() / 1000)
        const reply = yield* deliverTo(server.url, {
          headers: { authorization: "Bearer t0ken", "idempotency-key": "spoofed", "webhook-id": "spoofed" }
        })
        expect(reply).toEqual({ _tag: "Accepted" })
        expect(server.requests).toHaveLength(1)
        const [request] = server.requests
        expect(request!.method).toBe("POST")
        expect(request!.url).toBe("/deliveries")
        expect(request!.headers["idempotency-key"]).toBe("evt-A1")
        expect(request!.headers["webhook-id"]).toBe("evt-A1")
        const timestamp = Number(request!.headers["webhook-timestamp"])
        expect(timestamp).toBeGreaterThanOrEqual(before)
        expect(timestamp).toBeLessThanOrEqual(Math.floor(Date.now() / 1000))
        expect(request!.headers["webhook-signature"]).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/)
        expect(request!.headers["content-type"]).toMatch(/^application\/json/)
        expect(request!.headers["authorization"]).toBe("Bearer t0ken")
        expect(JSON.parse(request!.body)).toEqual({ eventId: "evt-A1", flowId: "A", seq: 1, body: { delta: 7, note: "héllo" } })
        // The reference library verifies it, and returns the document that was sent.
        expect(new Webhook(TestSecret).verify(request!.body, headersOf(request!))).toEqual(JSON.parse(request!.body))
        expect(() => new Webhook(OtherSecret).verify(request!.body, headersOf(request!))).toThrow(WebhookVerificationError)
      }))

    it.scopedLive("sends previousSeq in the signed document when the delivery has one (after discarded events)", () =>
      Effect.gen(function*() {
        const server = yield* scripted(answer(200, `{"ok":true}`))
        expect(yield* deliverTo(server.url, {}, { ...delivery, seq: 4, previousSeq: 1 })).toEqual({ _tag: "Accepted" })
        const [request] = server.requests
        expect(JSON.parse(request!.body)).toEqual({ eventId: "evt-A1", flowId: "A", seq: 4, body: { delta: 7, note: "héllo" }, previousSeq: 1 })
        expect(new Webhook(TestSecret).verify(request!.body, headersOf(request!))).toEqual(JSON.parse(request!.body))
      }))

    it.scopedLive("any 2xx of a plain endpoint is Accepted, with any body or none", () =>
      Effect.gen(function*() {
        expect(yield* replyTo(answer(200, `{"ok":true}`))).toEqual({ _tag: "Accepted" })
        expect(yield* replyTo(answer(204, "", {}))).toEqual({ _tag: "Accepted" })
        expect(yield* replyTo(answer(202, "<html>queued</html>", { "content-type": "text/html" }))).toEqual({ _tag: "Accepted" })
      }))

    it.scopedLive("a 429 or 503 is a Retry carrying Retry-After as its least delay", () =>
      Effect.gen(function*() {
        expect(yield* replyTo(answer(429, "", { "retry-after": "2" }))).toEqual({ _tag: "Retry", reason: "http 429", retryAfter: 2_000 })
        const at = new Date(Math.ceil(Date.now() / 1000) * 1000 + 60_000).toUTCString()
        const reply = yield* replyTo(answer(503, "", { "retry-after": at }))
        expect(reply).toMatchObject({ _tag: "Retry", reason: "http 503" })
        expect(reply._tag === "Retry" && reply.retryAfter).toBeGreaterThan(55_000)
        expect(reply._tag === "Retry" && reply.retryAfter).toBeLessThanOrEqual(61_000)
      }))

    it.scopedLive("a 400, 404 or 410 of a plain endpoint is Rejected with the status as its code", () =>
      Effect.gen(function*() {
        for (const status of [400, 404, 410]) {
          expect(yield* replyTo(answer(status, "nope", { "content-type": "text/plain" }))).toEqual({ _tag: "Rejected", code: `http_${status}` })
        }
      }))

    it.scopedLive("passes every fair-relay reply of a 2xx through unchanged", () =>
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
          expect(yield* replyTo(answerReply(200, JSON.stringify(reply)))).toEqual(reply)
        }
      }))

    it.scopedLive("a 503 is a Retry naming the status", () =>
      Effect.gen(function*() {
        expect(yield* replyTo(answer(503, "Service Unavailable", { "content-type": "text/plain" }))).toEqual({
          _tag: "Retry",
          reason: "http 503: Service Unavailable"
        })
      }))

    it.scopedLive("garbage in a fair-relay reply is a Retry quoting it, never an ack", () =>
      Effect.gen(function*() {
        expect(yield* replyTo(answerReply(200, "<html>oops</html>"))).toEqual({
          _tag: "Retry",
          reason: "unrecognised reply: http 200: <html>oops</html>"
        })
        expect(yield* replyTo(answerReply(200, `{"_tag":"Accepted"`))).toEqual({
          _tag: "Retry",
          reason: `unrecognised reply: http 200: {"_tag":"Accepted"`
        })
      }))

    it.scopedLive("an unknown tag in a fair-relay reply is a Retry quoting it", () =>
      Effect.gen(function*() {
        expect(yield* replyTo(answerReply(200, `{"_tag":"Bogus"}`))).toEqual({
          _tag: "Retry",
          reason: `unrecognised reply: http 200: {"_tag":"Bogus"}`
        })
      }))

    it.scopedLive("a 4xx carrying a fair-relay refusal is that refusal; a 4xx carrying an ack is not trusted", () =>
      Effect.gen(function*() {
        expect(yield* replyTo(answerReply(409, `{"_tag":"IdConflict"}`))).toEqual({ _tag: "IdConflict" })
        expect(yield* replyTo(answerReply(404, `{"_tag":"Accepted"}`))).toEqual({ _tag: "Retry", reason: `http 404: {"_tag":"Accepted"}` })
      }))

    it.scopedLive("a redirect is not followed: Rejected with the status as its code", () =>
      Effect.gen(function*() {
        const server = yield* scripted(answer(307, "", { location: "http://127.0.0.1:9/elsewhere" }))
        expect(yield* deliverTo(server.url)).toEqual({ _tag: "Rejected", code: "http_307" })
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

    it.scopedLive("a reply over MaxReplyBytes is a Retry with a reason, and the rest of it is not read", () =>
      Effect.gen(function*() {
        const total = 100 * 1024 * 1024
        const sent = { bytes: 0, finished: false, closed: false }
        const chunk = Buffer.alloc(64 * 1024, 0x78)
        const reply = yield* replyTo((_request, response) => {
          response.writeHead(200, { "content-type": HttpTransport.ReplyMediaType })
          response.on("finish", () => (sent.finished = true))
          response.on("close", () => (sent.closed = true))
          // Writes as fast as the reader takes it, until the whole reply is out or the reader is gone.
          const pump = () => {
            while (sent.bytes < total && !response.destroyed) {
              sent.bytes += chunk.length
              if (!response.write(chunk)) return void response.once("drain", pump)
            }
            if (sent.bytes >= total) response.end()
          }
          pump()
        })
        expect(reply).toEqual({ _tag: "Retry", reason: `reply larger than ${HttpTransport.MaxReplyBytes} bytes (http 200): not read` })
        // The worker dropped the connection: the server could not write the whole reply.
        for (let i = 0; i < 100 && !sent.closed; i++) yield* Effect.sleep("20 millis")
        expect(sent.closed).toBe(true)
        expect(sent.finished).toBe(false)
        expect(sent.bytes).toBeLessThan(total)
      }))

    it.scopedLive("a reply declaring a Content-Length over MaxReplyBytes is a Retry without reading it", () =>
      Effect.gen(function*() {
        const reply = yield* replyTo((_request, response) => {
          response.writeHead(200, { "content-type": "application/json", "content-length": String(10 * 1024 * 1024) })
          response.write("{")
        }, { timeout: "5 seconds" })
        expect(reply).toEqual({ _tag: "Retry", reason: `reply larger than ${HttpTransport.MaxReplyBytes} bytes (http 200): not read` })
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
  it.scopedLive("an unrecognised fair-relay reply is retried within the budget and then quarantined, never acked", () =>
    Effect.gen(function*() {
      const server = yield* scripted(answerReply(200, `{"_tag":"Bogus"}`))
      const layer = Relay.layer.pipe(
        Layer.provideMerge(SqliteRelayQueue.layer({ filename: ":memory:", policy: { leaseTicks: 60_000, retryBudget: 3, backoffBase: 0, backoffCap: 0 } })),
        Layer.provide(HttpTransport.layer({ url: server.url, secrets: TestSecret, timeout: "5 seconds" })),
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
        // The same webhook-id on every retry, each attempt signed for its own timestamp.
        expect(server.requests.map((r) => r.headers["webhook-id"])).toEqual(["A1", "A1", "A1"])
        for (const request of server.requests) expect(new Webhook(TestSecret).verify(request.body, headersOf(request))).toBeTruthy()
      }).pipe(Effect.provide(layer))
    }))
})

describe("HttpTransport under a relay, against a plain endpoint", () => {
  it.scopedLive("a 6 MB refusal is past the read bound: a Retry, nothing of it stored", () =>
    Effect.gen(function*() {
      const code = "no".repeat(3 * 1024 * 1024)
      const server = yield* scripted(answerReply(422, JSON.stringify({ _tag: "Rejected", code })))
      const layer = Relay.layer.pipe(
        Layer.provideMerge(SqliteRelayQueue.layer({ filename: ":memory:", policy: { leaseTicks: 60_000 } })),
        Layer.provide(HttpTransport.layer({ url: server.url, secrets: TestSecret, timeout: "5 seconds" })),
        Layer.provide(NodeHttpClient.layerUndici)
      )
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        const relay = yield* Relay
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        const step = yield* relay.step
        expect(step._tag === "Delivered" && step.reply).toMatchObject({ _tag: "Retry", reason: expect.stringMatching(/^reply larger than/) })
        const [event] = (yield* queue.snapshot).events
        expect(event!.state).toBe("ready")
        // The event keeps the last Retry reason: the transport's own words, none of the refusal.
        expect(event!.reason).toBe("reply larger than 65536 bytes (http 422): not read")
      }).pipe(Effect.provide(layer))
    }))

  it.scopedLive("a 60 KiB refusal code (within the read bound) is stored cut to 1 KiB with the marker", () =>
    Effect.gen(function*() {
      const code = "x".repeat(60 * 1024)
      const server = yield* scripted(answerReply(200, JSON.stringify({ _tag: "Rejected", code })))
      const layer = Relay.layer.pipe(
        Layer.provideMerge(SqliteRelayQueue.layer({ filename: ":memory:", policy: { leaseTicks: 60_000 } })),
        Layer.provide(HttpTransport.layer({ url: server.url, secrets: TestSecret, timeout: "5 seconds" })),
        Layer.provide(NodeHttpClient.layerUndici)
      )
      yield* Effect.gen(function*() {
        const queue = yield* RelayQueue
        const relay = yield* Relay
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        const step = yield* relay.step
        expect(step._tag === "Delivered" && step.outcome._tag).toBe("Quarantined")
        const [event] = (yield* queue.snapshot).events
        expect(event!.state).toBe("quarantined")
        expect(event!.reason!.endsWith(CutMarker)).toBe(true)
        expect(Buffer.byteLength(event!.reason!, "utf8")).toBeLessThanOrEqual(MaxStoredReasonBytes)
      }).pipe(Effect.provide(layer))
    }))
})

describe("Standard Webhooks interop with the standardwebhooks package", () => {
  it.scopedLive("it verifies every delivery, ids outside ASCII included, with either secret of a rotation", () =>
    Effect.gen(function*() {
      const server = yield* scripted(answer(204, "", {}))
      const transport = yield* HttpTransport.make({ url: server.url, secrets: `${TestSecret} ${OtherSecret}` })
      const inputs: ReadonlyArray<DeliveryInput> = [
        delivery,
        { eventId: "流-3", flowId: "流", seq: 3, body: { text: "ünïcödé ✓", n: [1, 2.5, null] } },
        { eventId: "a b/c?d", flowId: "F", seq: 1, body: {} }
      ]
      for (const input of inputs) expect(yield* transport.deliver(input)).toEqual({ _tag: "Accepted" })
      expect(server.requests).toHaveLength(inputs.length)
      for (const [i, request] of server.requests.entries()) {
        expect(String(request.headers["webhook-signature"]).split(" ")).toHaveLength(2)
        for (const secret of [TestSecret, OtherSecret]) {
          const verified = new Webhook(secret).verify(request.body, headersOf(request)) as { readonly eventId: string }
          expect(verified.eventId).toBe(inputs[i]!.eventId)
        }
        expect(decodeURIComponent(request.headers["webhook-id"] as string)).toBe(inputs[i]!.eventId)
        expect(() => new Webhook(`whsec_${Buffer.alloc(32, 1).toString("base64")}`).verify(request.body, headersOf(request))).toThrow()
      }
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))
})
