/**
 * What the receiver refuses before it reads a delivery: a body above its size limit (413, read
 * no further than the limit, nothing stored), a body that is not JSON by its media type (415),
 * and malformed documents (400) — every refusal a one-line message and a one-line log.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Layer, Ref } from "effect"
import * as HttpInbox from "../../src/http/HttpInbox.js"
import * as SqliteInbox from "../../src/layers/SqliteInbox.js"
import { Inbox } from "../../src/services/Inbox.js"
import { captureLogs } from "../support/logs.js"
import type { LogCapture } from "../support/logs.js"
import * as Receiver from "./receiver.js"
import { signedHeaders, TestSecret } from "./signing.js"

const MiB = 1024 * 1024

/** A receiver with `options`, whose logs are kept by `capture`. */
const receiver = (capture: LogCapture, options: Omit<HttpInbox.ServerOptions, "secrets"> = {}) =>
  HttpInbox.layerServer({ secrets: TestSecret, ...options }).pipe(
    Layer.provideMerge(SqliteInbox.layer({ filename: ":memory:", business: Receiver.business(Effect.runSync(Ref.make(1000))) })),
    Layer.provide(capture.layer)
  )

/** The messages `capture` kept so far. */
const messages = (capture: LogCapture) => capture.logs.map((log) => log.message)

interface Sent {
  readonly status: number
  readonly headers: Headers
  readonly json: { readonly error?: string; readonly message?: string; readonly _tag?: string }
}

// A request the connection drops fails (`UnknownException`, its cause the fetch error) rather
// than dies, so that a test may accept it (`Effect.either`). Whole bodies are signed; a streamed
// one is not (these tests refuse it for its size, before any signature is checked).
const post = (body: string | Uint8Array | ReadableStream<Uint8Array>, headers: Record<string, string> = { "content-type": "application/json" }) =>
  Effect.flatMap(HttpInbox.url, (base) =>
    Effect.tryPromise(async (): Promise<Sent> => {
      const response = await fetch(new URL("deliveries", base), {
        method: "POST",
        headers: body instanceof ReadableStream ? headers : { ...signedHeaders(body), ...headers },
        body,
        ...(body instanceof ReadableStream ? { duplex: "half" } : {})
      } as RequestInit)
      return { status: response.status, headers: response.headers, json: await response.json() as Sent["json"] }
    }))

const receipts = Effect.flatMap(Inbox, (inbox) => inbox.receipts)

const delivery = (eventId: string, seq: number, note = "") => JSON.stringify({ eventId, flowId: "A", seq, body: { delta: 1, note } })

describe("HttpInbox request size limit", () => {
  it.scopedLive("a 10 MB delivery is refused with 413 and nothing is stored", () => {
    const capture = captureLogs()
    return Effect.gen(function*() {
      const sent = yield* post(delivery("A1", 1, "x".repeat(10 * 1000 * 1000)))
      expect(sent.status).toBe(413)
      expect(sent.json).toEqual({ error: "payload_too_large", message: `the request body is larger than ${HttpInbox.DefaultMaxRequestBytes} bytes` })
      expect(sent.headers.get("connection")).toBe("close")
      expect(yield* receipts).toEqual([])
      expect(messages(capture)).toEqual([`HttpInbox: 413 payload_too_large: the request body is larger than ${HttpInbox.DefaultMaxRequestBytes} bytes`])
    }).pipe(Effect.provide(receiver(capture)))
  })

  it.scopedLive("the default limit takes the queue's largest body (1 MiB) with its envelope", () =>
    Effect.gen(function*() {
      // A body of exactly 1 MiB canonical bytes: {"delta":1,"note":"xxx…"}.
      const note = "x".repeat(MiB - `{"delta":1,"note":""}`.length)
      const sent = yield* post(JSON.stringify({ eventId: "流".repeat(200), flowId: "ключ".repeat(50), seq: 1, body: { delta: 1, note } }))
      expect(sent).toMatchObject({ status: 200, json: { _tag: "Accepted" } })
    }).pipe(Effect.provide(receiver(captureLogs()))))

  it.scopedLive("a streamed body without Content-Length is cut at the limit: 413, and the sender's stream is not read to its end", () =>
    Effect.gen(function*() {
      // 200 MB offered lazily; backpressure means the sender is only pulled as far as the
      // receiver reads (plus socket buffers), so `pulled` shows where the receiver stopped.
      const total = 200 * MiB
      const chunk = new Uint8Array(64 * 1024).fill(0x20)
      let pulled = 0
      const stream = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (pulled === 0) {
            const head = new TextEncoder().encode(`{"eventId":"A1","flowId":"A","seq":1,"body":{"delta":1,"note":"`)
            pulled += head.length
            controller.enqueue(head)
          } else if (pulled >= total) {
            controller.close()
          } else {
            pulled += chunk.length
            controller.enqueue(chunk)
          }
        }
      })
      const outcome = yield* Effect.either(post(stream))
      // The receiver answers 413 and closes; a client still uploading may see the close first.
      if (outcome._tag === "Right") expect(outcome.right).toMatchObject({ status: 413, json: { error: "payload_too_large" } })
      expect(pulled).toBeLessThan(32 * MiB)
      expect(yield* receipts).toEqual([])
    }).pipe(Effect.provide(receiver(captureLogs()))))

  it.scopedLive("the limit is configurable: maxRequestBytes admits up to it and refuses one byte more", () =>
    Effect.gen(function*() {
      const base = delivery("A1", 1)
      const exact = delivery("A1", 1, "x".repeat(1000 - base.length))
      expect(new TextEncoder().encode(exact).length).toBe(1000)
      expect(yield* post(delivery("A1", 1, "x".repeat(1001 - base.length)))).toMatchObject({ status: 413 })
      expect(yield* post(exact)).toMatchObject({ status: 200, json: { _tag: "Accepted" } })
    }).pipe(Effect.provide(receiver(captureLogs(), { maxRequestBytes: 1000 }))))

  it.effect("a limit that is not a positive integer fails makeHandler with InvalidInput", () =>
    Effect.gen(function*() {
      for (const maxRequestBytes of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
        const error = yield* Effect.flip(HttpInbox.makeHandler({ maxRequestBytes }))
        expect(error).toMatchObject({ _tag: "InvalidInput", operation: "HttpInbox.makeHandler" })
      }
    }))
})

describe("HttpInbox content type", () => {
  it.scopedLive("a body that is not declared JSON is refused with 415 before it is read", () => {
    const capture = captureLogs()
    return Effect.gen(function*() {
      const body = delivery("A1", 1)
      for (const contentType of ["text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin1", "application/jsonp"]) {
        const sent = yield* post(body, { "content-type": contentType })
        expect(sent, contentType).toMatchObject({ status: 415, json: { error: "unsupported_media_type" } })
      }
      // No Content-Type at all (fetch would add text/plain to a string body).
      expect(yield* post(new TextEncoder().encode(body), {})).toMatchObject({ status: 415, json: { error: "unsupported_media_type" } })
      expect(yield* receipts).toEqual([])
      for (const contentType of ["application/json; charset=UTF-8", "Application/JSON", "application/vnd.relay+json"]) {
        expect(yield* post(body, { "content-type": contentType }), contentType).toMatchObject({ status: 200 })
      }
      expect(messages(capture).filter((line) => line.includes("415"))).toHaveLength(5)
    }).pipe(Effect.provide(receiver(capture)))
  })
})

describe("HttpInbox 400s are one readable line", () => {
  it.scopedLive("malformed JSON, a document of the wrong shape and a body the inbox refuses: one-line messages and logs", () => {
    const capture = captureLogs()
    return Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [string, string, RegExp]> = [
        [`{"eventId":"A1",`, "malformed_json", /^the request body is not JSON: /],
        [JSON.stringify({ eventId: "", flowId: "A\u0000", seq: 0, body: {} }), "invalid_delivery", /^the document is not a delivery: eventId: eventId must not be empty$/],
        [JSON.stringify({ eventId: "A1", flowId: "A", seq: "1", body: {} }), "invalid_delivery", /^the document is not a delivery: seq: Expected/],
        [JSON.stringify({ eventId: "A1", flowId: "A", seq: 1 }), "invalid_delivery", /^body is undefined, which is not JSON$/],
        [`{"eventId":"A1","flowId":"A","seq":1,"body":{"delta":1e400}}`, "invalid_delivery", /not a JSON number/]
      ]
      for (const [body, error, message] of cases) {
        const sent = yield* post(body)
        expect(sent.status, body).toBe(400)
        expect(sent.json.error, body).toBe(error)
        expect(sent.json.message, body).toMatch(message)
        expect(sent.json.message).not.toMatch(/[\r\n└├]/)
      }
      const warnings = messages(capture).filter((line) => line.startsWith("HttpInbox: 400"))
      expect(warnings).toHaveLength(cases.length)
      for (const line of warnings) expect(line).not.toMatch(/[\r\n└├]/)
      expect(yield* receipts).toEqual([])
    }).pipe(Effect.provide(receiver(capture)))
  })
})
