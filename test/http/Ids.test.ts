/**
 * Ids in any script over HTTP: an id outside Latin-1 cannot go into a header raw (undici and
 * fetch refuse it, node:http throws `ERR_INVALID_CHAR`), so the transport percent-encodes it and
 * the receiver decodes it. Every `HttpClient` a user may pick delivers such events end to end, and
 * whatever a client throws is a `Retry`, never a defect.
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientError from "@effect/platform/HttpClientError"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import { Effect, Exit, FastCheck, Layer, Ref } from "effect"
import * as HttpInbox from "../../src/http/HttpInbox.js"
import * as HttpTransport from "../../src/http/HttpTransport.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { Inbox } from "../../src/services/Inbox.js"
import { Relay } from "../../src/services/Relay.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import * as Transport from "../../src/services/Transport.js"
import * as Receiver from "./receiver.js"
import { answer, scripted } from "./scripted.js"
import { signedHeaders, TestSecret } from "./signing.js"

const clients: ReadonlyArray<readonly [string, Layer.Layer<HttpClient.HttpClient>]> = [
  ["NodeHttpClient.layerUndici", NodeHttpClient.layerUndici],
  ["NodeHttpClient.layer", NodeHttpClient.layer],
  ["FetchHttpClient.layer", FetchHttpClient.layer]
]

/** Ids no header can carry raw, plus ASCII ids that look like percent-encoding already. */
const events = [
  { eventId: "流-3", flowId: "流", body: { delta: 1 } },
  { eventId: "🚀-4", flowId: "🚀", body: { delta: 2 } },
  { eventId: "ключ-5", flowId: "ключ", body: { delta: 3 } },
  { eventId: "é-6 (Latin-1)", flowId: "é", body: { delta: 4 } },
  { eventId: "a%41 b", flowId: "%", body: { delta: 5 } }
] as const

describe("Idempotency-Key encoding", () => {
  it("ASCII ids of unreserved characters travel unchanged; others as percent-encoded UTF-8", () => {
    expect(HttpTransport.encodeIdempotencyKey("evt-A1")).toBe("evt-A1")
    expect(HttpTransport.encodeIdempotencyKey("流-3")).toBe("%E6%B5%81-3")
    expect(HttpTransport.encodeIdempotencyKey("a%41 b")).toBe("a%2541%20b")
    expect(HttpTransport.decodeIdempotencyKey("%E6%B5%81-3")).toBe("流-3")
    expect(HttpTransport.decodeIdempotencyKey("%E6%B5")).toBeUndefined()
  })

  it.prop("decoding an encoded id gives the id back, and the encoding is a valid header value", [FastCheck.string({ unit: "grapheme", minLength: 1, maxLength: 40 })], ([id]) => {
    const key = HttpTransport.encodeIdempotencyKey(id)
    expect(key).toMatch(/^[\x21-\x7e]+$/)
    expect(HttpTransport.decodeIdempotencyKey(key)).toBe(id)
  })
})

for (const [name, client] of clients) {
  describe(`ids outside Latin-1 over HTTP (${name})`, () => {
    it.scopedLive("the header carries the id percent-encoded and the body carries it verbatim", () =>
      Effect.gen(function*() {
        const server = yield* scripted(answer(200, `{"_tag":"Accepted"}`))
        const transport = yield* HttpTransport.make({ url: server.url, secrets: TestSecret, timeout: "5 seconds" })
        for (const [i, event] of events.entries()) {
          expect(yield* transport.deliver({ ...event, seq: i + 1 })).toEqual({ _tag: "Accepted" })
        }
        expect(server.requests.map((r) => r.headers["idempotency-key"])).toEqual(events.map((e) => encodeURIComponent(e.eventId)))
        expect(server.requests.map((r) => (JSON.parse(r.body) as { eventId: string }).eventId)).toEqual(events.map((e) => e.eventId))
      }).pipe(Effect.provide(client)))

    it.scopedLive("a relay delivers them to a real receiver and acks them; a resend is a Duplicate", () =>
      Effect.gen(function*() {
        const maxDelta = yield* Ref.make(1000)
        const receiver = Receiver.layer(maxDelta)
        const transport = Layer.unwrapEffect(
          Effect.map(HttpInbox.url, (base) => HttpTransport.layer({ url: new URL("deliveries", base).href, secrets: TestSecret, timeout: "5 seconds" }))
        )
        const system = Relay.layer.pipe(
          Layer.provideMerge(SqliteRelayQueue.layer({ filename: ":memory:", policy: { leaseTicks: 60_000 } })),
          Layer.provideMerge(transport),
          Layer.provide(client),
          Layer.provideMerge(receiver)
        )
        yield* Effect.gen(function*() {
          const queue = yield* RelayQueue
          const relay = yield* Relay
          yield* Effect.forEach(events, (event) => queue.enqueue(event), { discard: true })
          const steps: Array<readonly [string, string, string]> = []
          for (let i = 0; i < events.length + 2; i++) {
            const step = yield* relay.step
            if (step._tag === "Idle") break
            steps.push([step.claimed.event.eventId, step.reply._tag, step.outcome._tag])
          }
          expect(steps.slice().sort()).toEqual(events.map((e) => [e.eventId, "Accepted", "Acked"]).slice().sort())
          expect((yield* queue.snapshot).events.map((e) => e.state)).toEqual(events.map(() => "acked"))
          const inbox = yield* Inbox
          expect((yield* inbox.receipts).map((r) => r.eventId).slice().sort()).toEqual(events.map((e) => e.eventId).slice().sort())
          const http = yield* Transport.Transport
          expect(yield* http.deliver({ ...events[0], seq: 1 })).toEqual({ _tag: "Duplicate" })
        }).pipe(Effect.provide(system))
      }))
  })
}

describe("HttpInbox reads the encoded key", () => {
  it.scopedLive("accepts the encoded key and a raw one equal to the event id, refuses a key naming another id", () =>
    Effect.gen(function*() {
      const url = new URL("deliveries", yield* HttpInbox.url)
      const post = (eventId: string, seq: number, key: string) =>
        Effect.promise(() => {
          const body = JSON.stringify({ eventId, flowId: "F", seq, body: { delta: 1 } })
          return fetch(url, {
            method: "POST",
            headers: { "content-type": "application/json", ...signedHeaders(body), "idempotency-key": key },
            body
          }).then(async (response) => ({ status: response.status, json: await response.json() as unknown }))
        })
      expect(yield* post("流-1", 1, "%E6%B5%81-1")).toEqual({ status: 200, json: { _tag: "Accepted" } })
      expect(yield* post("a%41", 2, "a%41")).toEqual({ status: 200, json: { _tag: "Accepted" } })
      expect(yield* post("a%41", 2, "a%2541")).toEqual({ status: 200, json: { _tag: "Duplicate" } })
      expect(yield* post("流-3", 3, "%E6%B5%81-4")).toMatchObject({ status: 400, json: { error: "idempotency_key_mismatch" } })
      expect(yield* post("流-3", 3, "%E6%B5")).toMatchObject({ status: 400, json: { error: "idempotency_key_mismatch" } })
      expect((yield* Effect.flatMap(Inbox, (inbox) => inbox.receipts)).map((r) => r.eventId)).toEqual(["流-1", "a%41"])
    }).pipe(Effect.provide(Receiver.layer(Effect.runSync(Ref.make(1000))))))
})

describe("a client that throws is a Retry, never a defect", () => {
  const throwing = HttpClient.make(() => {
    throw Object.assign(new TypeError("Invalid character in header content [\"idempotency-key\"]"), { code: "ERR_INVALID_CHAR" })
  })
  const dying = HttpClient.make(() => Effect.die(new Error("client exploded")))
  const failing = HttpClient.make((request) =>
    Effect.fail(new HttpClientError.RequestError({ request, reason: "Transport", cause: new Error("socket hang up") })))

  it.effect("a synchronous throw, an Effect.die and a typed failure each become a Retry with the reason", () =>
    Effect.gen(function*() {
      const delivery = { eventId: "流-3", flowId: "流", seq: 1, body: { delta: 1 } }
      const replies: Array<unknown> = []
      for (const client of [throwing, dying, failing]) {
        const transport = yield* Effect.provideService(HttpTransport.make({ url: "http://127.0.0.1:9/deliveries", secrets: TestSecret }), HttpClient.HttpClient, client)
        const exit = yield* Effect.exit(transport.deliver(delivery))
        expect(Exit.isSuccess(exit)).toBe(true)
        if (Exit.isSuccess(exit)) replies.push(exit.value)
      }
      expect(replies).toEqual([
        { _tag: "Retry", reason: "transport threw: ERR_INVALID_CHAR Invalid character in header content [\"idempotency-key\"]" },
        { _tag: "Retry", reason: "transport threw: client exploded" },
        { _tag: "Retry", reason: "transport: socket hang up" }
      ])
    }))

  it.effect("under a relay, a throwing client's delivery is settled as a scheduled retry; the step does not die", () =>
    Effect.gen(function*() {
      const queue = yield* RelayQueue
      yield* queue.enqueue({ eventId: "流-3", flowId: "流", body: { delta: 1 } })
      const step = yield* (yield* Relay).step
      expect(step._tag).toBe("Delivered")
      if (step._tag === "Delivered") {
        expect(step.reply).toMatchObject({ _tag: "Retry", reason: expect.stringMatching(/^transport threw: ERR_INVALID_CHAR/) })
        expect(step.outcome._tag).toBe("RetryScheduled")
      }
    }).pipe(Effect.provide(Relay.layer.pipe(
      Layer.provideMerge(SqliteRelayQueue.layer({ filename: ":memory:", policy: { leaseTicks: 60_000 } })),
      Layer.provide(HttpTransport.layer({ url: "http://127.0.0.1:9/deliveries", secrets: TestSecret })),
      Layer.provide(Layer.succeed(HttpClient.HttpClient, throwing))
    ))))

  it.effect("Transport.guard turns a transport's defect into DeliveryFailed", () =>
    Effect.gen(function*() {
      const guarded = Transport.guard({ deliver: () => Effect.die(new Error("bug")) })
      const error = yield* Effect.flip(guarded.deliver({ eventId: "E1", flowId: "F", seq: 1, body: {} }))
      expect(error).toBeInstanceOf(Transport.DeliveryFailed)
      expect(error).toMatchObject({ eventId: "E1", message: "transport threw: bug" })
    }))
})

describe("HttpTransport.make refuses extra headers no client can send", () => {
  it.effect("a value outside Latin-1, a newline in a value, a bad name: InvalidInput naming the header, not its value", () =>
    Effect.gen(function*() {
      for (const headers of [{ "x-tenant": "ключ" }, { authorization: "Bearer a\r\nx-evil: 1" }, { "bad name": "v" }]) {
        const error = yield* Effect.flip(HttpTransport.make({ url: "http://127.0.0.1:9/deliveries", secrets: TestSecret, headers }))
        expect(error._tag).toBe("InvalidInput")
        expect(error.message).not.toContain("Bearer")
      }
      yield* HttpTransport.make({ url: "http://127.0.0.1:9/deliveries", secrets: TestSecret, headers: { "x-tenant": "café" } })
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))
})
