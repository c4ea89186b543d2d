/**
 * The receiver-side handler on a real Node server (127.0.0.1, port 0) over a SQLite inbox:
 * protocol replies are 200s carrying the inbox's reply; input it cannot take is a 400, a failing
 * store a 500 — and the transport reads both as `Retry`, never as an ack.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { createServer } from "node:http"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Ref } from "effect"
import * as HttpInbox from "../../src/http/HttpInbox.js"
import * as HttpTransport from "../../src/http/HttpTransport.js"
import * as SqliteInbox from "../../src/layers/SqliteInbox.js"
import { Inbox } from "../../src/services/Inbox.js"
import * as Receiver from "./receiver.js"

const withReceiver = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Ref.make(1000), (maxDelta) =>
    Effect.provide(effect, Layer.merge(Receiver.layer(maxDelta), NodeHttpClient.layerUndici)))

const send = (options: { readonly method?: "POST" | "GET" | "PUT"; readonly body?: string; readonly headers?: Record<string, string> }) =>
  Effect.gen(function*() {
    const client = yield* HttpClient.HttpClient
    const url = new URL("deliveries", yield* HttpInbox.url)
    let request = HttpClientRequest.make(options.method ?? "POST")(url, { headers: options.headers ?? {} })
    if (options.body !== undefined) request = HttpClientRequest.bodyText(request, options.body, "application/json")
    const response = yield* client.execute(request)
    const text = yield* response.text
    return { status: response.status, headers: response.headers, json: JSON.parse(text) as unknown }
  })

const post = (document: unknown, headers?: Record<string, string>) =>
  send({ body: JSON.stringify(document), ...(headers === undefined ? {} : { headers }) })

describe("HttpInbox.handler over a loopback socket", () => {
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

  it.scopedLive("the transport reads a 400 and a 500 of the handler as Retry with their reasons", () =>
    withReceiver(Effect.gen(function*() {
      const url = new URL("deliveries", yield* HttpInbox.url).href
      const transport = yield* HttpTransport.make({ url, timeout: "5 seconds" })
      expect(yield* transport.deliver({ eventId: "A1", flowId: "A", seq: 1, body: { delta: Receiver.PoisonDelta } })).toEqual({
        _tag: "Retry",
        reason: "http 500: receiver_store: the receiver's store failed; see the receiver's log"
      })
      const invalid = yield* transport.deliver({ eventId: "A1", flowId: "A", seq: -1, body: { delta: 1 } })
      expect(invalid._tag).toBe("Retry")
      expect(invalid._tag === "Retry" && invalid.reason).toMatch(/^http 400: invalid_delivery: /)
      expect(yield* transport.deliver({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 1 } })).toEqual({ _tag: "Accepted" })
    })))
})

describe("HttpInbox.handler mounted on a route", () => {
  it.scopedLive("answers on its route of an HttpRouter and leaves other paths to the router", () =>
    Effect.gen(function*() {
      const maxDelta = yield* Ref.make(1000)
      const server = HttpRouter.empty.pipe(
        HttpRouter.post("/relay/deliveries", HttpInbox.handler),
        HttpServer.serve(),
        Layer.provideMerge(NodeHttpServer.layer(() => createServer(), { port: 0, host: "127.0.0.1" })),
        Layer.provideMerge(SqliteInbox.layer({ filename: ":memory:", business: Receiver.business(maxDelta) }))
      )
      yield* Effect.gen(function*() {
        const base = yield* HttpInbox.url
        const client = yield* HttpClient.HttpClient
        const transport = yield* HttpTransport.make({ url: new URL("relay/deliveries", base).href })
        expect(yield* transport.deliver({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 1 } })).toEqual({ _tag: "Accepted" })
        const elsewhere = yield* client.execute(HttpClientRequest.post(new URL("deliveries", base)))
        expect(elsewhere.status).toBe(404)
        const misrouted = yield* HttpTransport.make({ url: new URL("deliveries", base).href })
        expect(yield* misrouted.deliver({ eventId: "A2", flowId: "A", seq: 2, body: { delta: 1 } })).toEqual({ _tag: "Retry", reason: "http 404" })
      }).pipe(Effect.provide(Layer.merge(server, NodeHttpClient.layerUndici)))
    }))
})
