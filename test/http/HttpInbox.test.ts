/**
 * The receiver-side handler on a real Node server (127.0.0.1, port 0) over a SQLite inbox:
 * it verifies each request's Standard Webhooks signature before reading it; protocol replies are
 * 200s carrying the inbox's reply as a fair-relay reply; input it cannot take is a 4xx (the
 * transport quarantines it as `Rejected{"http_4xx"}`), a failing store a 500 (`Retry`) — never
 * an ack.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { createServer } from "node:http"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Layer, Logger, Redacted, Ref } from "effect"
import * as HttpInbox from "../../src/http/HttpInbox.js"
import * as HttpTransport from "../../src/http/HttpTransport.js"
import * as SqliteInbox from "../../src/layers/SqliteInbox.js"
import { Inbox } from "../../src/services/Inbox.js"
import * as Receiver from "./receiver.js"
import { OtherSecret, signedHeaders, TestSecret } from "./signing.js"

const withReceiver = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Ref.make(1000), (maxDelta) =>
    Effect.provide(effect, Layer.merge(Receiver.layer(maxDelta), NodeHttpClient.layerUndici)))

/** Sends a request, signed with `TestSecret` by `standardwebhooks` unless `signed` is false or headers say otherwise. */
const send = (options: {
  readonly method?: "POST" | "GET" | "PUT"
  readonly body?: string | Uint8Array
  readonly headers?: Record<string, string>
  readonly signed?: boolean
}) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const url = new URL("deliveries", yield* HttpInbox.url)
    const signature = options.signed === false ? {} : signedHeaders(options.body ?? "")
    let request = HttpClientRequest.make(options.method ?? "POST")(url, { headers: { ...signature, ...options.headers } })
    if (typeof options.body === "string") request = HttpClientRequest.bodyText(request, options.body, "application/json")
    if (options.body instanceof Uint8Array) request = HttpClientRequest.bodyUint8Array(request, options.body, "application/json")
    const response = yield* client.execute(request)
    const text = yield* response.text
    return { status: response.status, headers: response.headers, json: JSON.parse(text) as unknown }
  })

const post = (document: unknown, headers?: Record<string, string>) =>
  send({ body: JSON.stringify(document), ...(headers === undefined ? {} : { headers }) })

describe("HttpInbox over a loopback socket", () => {
  it.scopedLive("listens on 127.0.0.1 at an ephemeral port", () =>
    withReceiver(Effect.gen(function*() {
      const url = new URL(yield* HttpInbox.url)
      expect(url.hostname).toBe("127.0.0.1")
      expect(Number(url.port)).toBeGreaterThan(0)
    })))

  it.scopedLive("answers every protocol reply as a 200 with the reply as JSON", () =>
    withReceiver(Effect.gen(function*() {
      const a1 = { eventId: "A1", flowId: "A", seq: 1, body: { delta: 2 } }
      expect(yield* post(a1, { "idempotency-key": "A1" })).toMatchObject({ status: 200, json: { _tag: "Accepted" } })
      expect(yield* post(a1)).toMatchObject({ status: 200, json: { _tag: "Duplicate" } })
      expect(yield* post({ ...a1, body: { delta: 3 } })).toMatchObject({ status: 200, json: { _tag: "IdConflict" } })
      expect(yield* post({ eventId: "A1-bis", flowId: "A", seq: 1, body: { delta: 2 } })).toMatchObject({
        status: 200,
        json: { _tag: "SequenceConflict" }
      })
      expect(yield* post({ eventId: "A3", flowId: "A", seq: 3, body: { delta: 1 } })).toMatchObject({
        status: 200,
        json: { _tag: "Gap", expected: 2 }
      })
      expect(yield* post({ eventId: "A2", flowId: "A", seq: 2, body: { delta: 5000 } })).toMatchObject({
        status: 200,
        json: { _tag: "Rejected", code: "unsupported_delta" }
      })
      const inbox = yield* Inbox
      expect((yield* inbox.receipts).map((r) => r.eventId)).toEqual(["A1"])
    })))

  it.scopedLive("accepts a seq past a gap whose previousSeq it applied (events discarded in between), and Gap otherwise", () =>
    withReceiver(Effect.gen(function*() {
      expect(yield* post({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 2 } })).toMatchObject({ json: { _tag: "Accepted" } })
      expect(yield* post({ eventId: "A4", flowId: "A", seq: 4, body: { delta: 1 }, previousSeq: 2 })).toMatchObject({
        status: 200,
        json: { _tag: "Gap", expected: 2 }
      })
      expect(yield* post({ eventId: "A3", flowId: "A", seq: 3, body: { delta: 1 }, previousSeq: 1 })).toMatchObject({
        status: 200,
        json: { _tag: "Accepted" }
      })
      const inbox = yield* Inbox
      expect(yield* inbox.progress).toEqual(new Map([["A", 3]]))
      expect((yield* inbox.receipts).map((r) => r.eventId)).toEqual(["A1", "A3"])
    })))

  it.scopedLive("answers 400 invalid_delivery to a previousSeq that is not below seq, and stores nothing", () =>
    withReceiver(Effect.gen(function*() {
      for (const previousSeq of [3, 4, -1, 1.5, "1"]) {
        const response = yield* post({ eventId: "A3", flowId: "A", seq: 3, body: { delta: 1 }, previousSeq })
        expect(response).toMatchObject({ status: 400, json: { error: "invalid_delivery" } })
      }
      expect(yield* Effect.flatMap(Inbox, (inbox) => inbox.receipts)).toEqual([])
    })))

  it.scopedLive("answers with the fair-relay reply media type", () =>
    withReceiver(Effect.gen(function*() {
      const response = yield* post({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 2 } })
      expect(response.headers["content-type"]).toBe(HttpTransport.ReplyMediaType)
    })))

  it.scopedLive("answers 401 to a request without the signature headers, and stores nothing", () =>
    withReceiver(Effect.gen(function*() {
      const body = JSON.stringify({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 2 } })
      expect(yield* send({ body, signed: false })).toMatchObject({ status: 401, json: { error: "unauthorized" } })
      const signed = signedHeaders(body)
      for (const missing of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
        const headers = Object.fromEntries(Object.entries(signed).filter(([name]) => name !== missing))
        expect(yield* send({ body, headers, signed: false })).toMatchObject({ status: 401, json: { error: "unauthorized" } })
      }
      expect(yield* Effect.flatMap(Inbox, (inbox) => inbox.receipts)).toEqual([])
    })))

  it.scopedLive("answers 401 to a tampered body, a wrong secret, an old or a future timestamp, and stores nothing", () =>
    withReceiver(Effect.gen(function*() {
      const body = JSON.stringify({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 2 } })
      const tampered = body.replace(`"delta":2`, `"delta":9`)
      expect(yield* send({ body: tampered, headers: signedHeaders(body), signed: false })).toMatchObject({ status: 401 })
      expect(yield* send({ body, headers: signedHeaders(body, { secret: OtherSecret }), signed: false })).toMatchObject({ status: 401 })
      const sixMinutes = 6 * 60 * 1000
      for (const at of [new Date(Date.now() - sixMinutes), new Date(Date.now() + sixMinutes)]) {
        const response = yield* send({ body, headers: signedHeaders(body, { at }), signed: false })
        expect(response).toMatchObject({ status: 401, json: { error: "unauthorized" } })
        expect((response.json as { readonly message: string }).message).toMatch(/tolerance/)
      }
      // Another message id under the same body and a valid signature of that id: still not this request's.
      const other = signedHeaders(body, { id: "B1" })
      expect(yield* send({ body, headers: { ...signedHeaders(body), "webhook-signature": other["webhook-signature"]! }, signed: false }))
        .toMatchObject({ status: 401 })
      expect(yield* Effect.flatMap(Inbox, (inbox) => inbox.receipts)).toEqual([])
      // Four minutes off is within the tolerance.
      const recent = signedHeaders(body, { at: new Date(Date.now() - 4 * 60 * 1000) })
      expect(yield* send({ body, headers: recent, signed: false })).toMatchObject({ status: 200, json: { _tag: "Accepted" } })
    })))

  it.scopedLive("answers 400 when the webhook-id is not the body's eventId, even when correctly signed", () =>
    withReceiver(Effect.gen(function*() {
      const body = JSON.stringify({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 2 } })
      const response = yield* send({ body, headers: signedHeaders(body, { id: "B7" }), signed: false })
      expect(response).toMatchObject({ status: 400, json: { error: "idempotency_key_mismatch" } })
      expect(yield* Effect.flatMap(Inbox, (inbox) => inbox.receipts)).toEqual([])
    })))

  it.scopedLive("answers 400 to a body that is not valid UTF-8: two ids that would fold into one U+FFFD are both refused", () =>
    withReceiver(Effect.gen(function*() {
      // "A\xff" and "A\xfe" both read as "A\ufffd" when decoded leniently.
      const bytes = (invalid: number) =>
        Buffer.concat([Buffer.from(`{"eventId":"A`), Buffer.from([invalid]), Buffer.from(`","flowId":"A","seq":1,"body":{"delta":1}}`)])
      for (const invalid of [0xff, 0xfe]) {
        const body = bytes(invalid)
        const response = yield* send({ body, headers: signedHeaders(body, { id: "A-bytes" }), signed: false })
        expect(response).toMatchObject({ status: 400, json: { error: "malformed_json", message: "the request body is not valid UTF-8" } })
      }
      expect(yield* Effect.flatMap(Inbox, (inbox) => inbox.receipts)).toEqual([])
    })))

  it.scopedLive("answers 405 to anything but POST", () =>
    withReceiver(Effect.gen(function*() {
      const response = yield* send({ method: "GET" })
      expect(response.status).toBe(405)
      expect(response.headers["allow"]).toBe("POST")
      expect(response.json).toMatchObject({ error: "method_not_allowed" })
    })))

  it.scopedLive("answers 400 malformed_json to a body that is not JSON, and stores nothing", () =>
    withReceiver(Effect.gen(function*() {
      const response = yield* send({ body: `{"eventId":"A1",` })
      expect(response).toMatchObject({ status: 400, json: { error: "malformed_json" } })
      expect(yield* Effect.flatMap(Inbox, (inbox) => inbox.receipts)).toEqual([])
    })))

  it.scopedLive("answers 400 invalid_delivery to a document of the wrong shape", () =>
    withReceiver(Effect.gen(function*() {
      for (const document of [[1, 2], { eventId: "A1", flowId: "A", seq: 0, body: {} }, { eventId: "", flowId: "A", seq: 1, body: {} }, {}]) {
        const response = yield* post(document)
        expect(response).toMatchObject({ status: 400, json: { error: "invalid_delivery" } })
        expect(typeof (response.json as { readonly message?: unknown }).message).toBe("string")
      }
      expect(yield* Effect.flatMap(Inbox, (inbox) => inbox.receipts)).toEqual([])
    })))

  it.scopedLive("answers 400 when the Idempotency-Key differs from the body's eventId", () =>
    withReceiver(Effect.gen(function*() {
      const response = yield* post({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 1 } }, { "idempotency-key": "B7" })
      expect(response).toMatchObject({ status: 400, json: { error: "idempotency_key_mismatch" } })
      expect(yield* Effect.flatMap(Inbox, (inbox) => inbox.receipts)).toEqual([])
    })))

  it.scopedLive("answers 500 receiver_store when the store fails, without the database's message", () =>
    withReceiver(Effect.gen(function*() {
      const response = yield* post({ eventId: "A1", flowId: "A", seq: 1, body: { delta: Receiver.PoisonDelta } })
      expect(response).toMatchObject({ status: 500, json: { error: "receiver_store" } })
      expect(JSON.stringify(response.json)).not.toContain("no_such_table")
      const inbox = yield* Inbox
      expect(yield* inbox.receipts).toEqual([])
      expect(yield* inbox.progress).toEqual(new Map())
    })))

  it.scopedLive("the transport reads a 500 of the handler as Retry, a 400 as Rejected http_400, and its replies as themselves", () =>
    withReceiver(Effect.gen(function*() {
      const url = new URL("deliveries", yield* HttpInbox.url).href
      const transport = yield* HttpTransport.make({ url, secrets: TestSecret, timeout: "5 seconds" })
      expect(yield* transport.deliver({ eventId: "A1", flowId: "A", seq: 1, body: { delta: Receiver.PoisonDelta } })).toEqual({
        _tag: "Retry",
        reason: "http 500: receiver_store: the receiver's store failed; see the receiver's log"
      })
      expect(yield* transport.deliver({ eventId: "A1", flowId: "A", seq: -1, body: { delta: 1 } })).toEqual({ _tag: "Rejected", code: "http_400" })
      expect(yield* transport.deliver({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 1 } })).toEqual({ _tag: "Accepted" })
      expect(yield* transport.deliver({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 1 } })).toEqual({ _tag: "Duplicate" })
      expect(yield* transport.deliver({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 2 } })).toEqual({ _tag: "IdConflict" })
    })))
})

describe("HttpInbox.makeHandler mounted on a route", () => {
  it.scopedLive("answers on its route of an HttpRouter and leaves other paths to the router", () =>
    Effect.gen(function*() {
      const maxDelta = yield* Ref.make(1000)
      const server = HttpRouter.empty.pipe(
        HttpRouter.post("/relay/deliveries", yield* HttpInbox.makeHandler({ secrets: TestSecret })),
        HttpServer.serve(),
        Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: 0, host: "127.0.0.1" })),
        Layer.provideMerge(SqliteInbox.layer({ filename: ":memory:", business: Receiver.business(maxDelta) }))
      )
      yield* Effect.gen(function*() {
        const base = yield* HttpInbox.url
        const client = yield* HttpClient.HttpClient
        const transport = yield* HttpTransport.make({ url: new URL("relay/deliveries", base).href, secrets: TestSecret })
        expect(yield* transport.deliver({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 1 } })).toEqual({ _tag: "Accepted" })
        const elsewhere = yield* client.execute(HttpClientRequest.post(new URL("deliveries", base)))
        expect(elsewhere.status).toBe(404)
        const misrouted = yield* HttpTransport.make({ url: new URL("deliveries", base).href, secrets: TestSecret })
        expect(yield* misrouted.deliver({ eventId: "A2", flowId: "A", seq: 2, body: { delta: 1 } })).toEqual({ _tag: "Rejected", code: "http_404" })
      }).pipe(Effect.provide(Layer.merge(server, NodeHttpClient.layerUndici)))
    }))
})

describe("HttpInbox.makeHandler and its secrets", () => {
  it.effect("refuses to be built without a secret, and with one that is not whsec_ base64", () =>
    Effect.gen(function*() {
      const missing = yield* Effect.flip(HttpInbox.makeHandler({}))
      expect(missing).toMatchObject({ _tag: "MissingWebhookSecret", operation: "HttpInbox.makeHandler" })
      expect(yield* Effect.flip(HttpInbox.makeHandler({ secrets: "" }))).toMatchObject({ _tag: "MissingWebhookSecret" })
      expect(yield* Effect.flip(HttpInbox.makeHandler({ unauthenticated: false }))).toMatchObject({ _tag: "MissingWebhookSecret" })
      for (const secrets of ["hunter2", "whsec_", "whsec_not base64!", [TestSecret, "whsec_%%%"]]) {
        const error = yield* Effect.flip(HttpInbox.makeHandler({ secrets }))
        expect(error).toMatchObject({ _tag: "InvalidWebhookSecret" })
        expect(error.message).not.toContain("hunter2")
      }
      expect(yield* Effect.flip(HttpInbox.makeHandler({ secrets: TestSecret, unauthenticated: true }))).toMatchObject({ _tag: "InvalidWebhookSecret" })
    }))

  it.effect("without a secret and with unauthenticated: true, it is built and says so in its log", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const logger = Logger.make(({ logLevel, message }) => lines.push(`${logLevel.label} ${String(message)}`))
      const built = yield* Effect.either(HttpInbox.makeHandler({ unauthenticated: true }).pipe(
        Effect.provide(Logger.replace(Logger.defaultLogger, logger))
      ))
      expect(Either.isRight(built)).toBe(true)
      expect(lines).toHaveLength(1)
      expect(lines[0]).toMatch(/^WARN HttpInbox.makeHandler: unauthenticated: true — deliveries are accepted without a signature/)
    }))

  it.scopedLive("an unauthenticated receiver takes an unsigned delivery", () =>
    Effect.gen(function*() {
      const maxDelta = yield* Ref.make(1000)
      const server = HttpInbox.layerServer({ unauthenticated: true }).pipe(
        Layer.provideMerge(SqliteInbox.layer({ filename: ":memory:", business: Receiver.business(maxDelta) }))
      )
      yield* Effect.gen(function*() {
        const url = new URL("deliveries", yield* HttpInbox.url).href
        const transport = yield* HttpTransport.make({ url, unsigned: true })
        expect(yield* transport.deliver({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 1 } })).toEqual({ _tag: "Accepted" })
      }).pipe(Effect.provide(Layer.merge(server, NodeHttpClient.layerUndici)))
    }))

  it.scopedLive("during a rotation it accepts deliveries signed with either secret, and refuses a third", () =>
    Effect.gen(function*() {
      const maxDelta = yield* Ref.make(1000)
      const server = HttpInbox.layerServer({ secrets: [Redacted.make(TestSecret), OtherSecret] }).pipe(
        Layer.provideMerge(SqliteInbox.layer({ filename: ":memory:", business: Receiver.business(maxDelta) }))
      )
      const third = `whsec_${Buffer.alloc(24, 7).toString("base64")}`
      yield* Effect.gen(function*() {
        const url = new URL("deliveries", yield* HttpInbox.url).href
        const oldOnly = yield* HttpTransport.make({ url, secrets: TestSecret })
        const newOnly = yield* HttpTransport.make({ url, secrets: OtherSecret })
        const both = yield* HttpTransport.make({ url, secrets: `${OtherSecret} ${TestSecret}` })
        const stranger = yield* HttpTransport.make({ url, secrets: third })
        expect(yield* oldOnly.deliver({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 1 } })).toEqual({ _tag: "Accepted" })
        expect(yield* newOnly.deliver({ eventId: "A2", flowId: "A", seq: 2, body: { delta: 1 } })).toEqual({ _tag: "Accepted" })
        expect(yield* both.deliver({ eventId: "A3", flowId: "A", seq: 3, body: { delta: 1 } })).toEqual({ _tag: "Accepted" })
        expect(yield* stranger.deliver({ eventId: "A4", flowId: "A", seq: 4, body: { delta: 1 } })).toEqual({ _tag: "Rejected", code: "http_401" })
      }).pipe(Effect.provide(Layer.merge(server, NodeHttpClient.layerUndici)))
    }))
})
