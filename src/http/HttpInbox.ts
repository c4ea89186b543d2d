/**
 * The receiver's side of `HttpTransport`: an HTTP handler that checks each `POST`ed delivery's
 * Standard Webhooks signature, hands the delivery to `Inbox.receive` and answers with its reply
 * as a fair-relay reply (`Content-Type: application/vnd.fair-relay.reply+json`).
 *
 * | request                                                          | status | body                             |
 * |------------------------------------------------------------------|--------|----------------------------------|
 * | any delivery the inbox answered (every `DeliveryReply`)          | 200    | the reply, e.g. `{"_tag":"Accepted"}` |
 * | not a `POST`                                                     | 405    | `{"error":"method_not_allowed",…}` |
 * | body above `maxRequestBytes` (declared, or counted while reading) | 413    | `{"error":"payload_too_large",…}` |
 * | signature headers missing, no signature matches, timestamp off by more than `toleranceSeconds` | 401 | `{"error":"unauthorized",…}` |
 * | `Content-Type` not `application/json` (or `…+json`, UTF-8)       | 415    | `{"error":"unsupported_media_type",…}` |
 * | body is not valid UTF-8, or not JSON                             | 400    | `{"error":"malformed_json",…}`   |
 * | the document is not a delivery (bad id, seq, missing body)       | 400    | `{"error":"invalid_delivery",…}` |
 * | `webhook-id` or `Idempotency-Key` not the body's `eventId`       | 400    | `{"error":"idempotency_key_mismatch",…}` |
 * | the receiver's database failed (`SqlError`)                      | 500    | `{"error":"receiver_store",…}`   |
 *
 * The signature is checked on the bytes as they came, before anything reads them as text or
 * JSON: an unsigned request learns nothing about the receiver but the 401. Signatures compare in
 * constant time; several secrets are accepted at once during a rotation. A handler without a
 * secret refuses to be built (`MissingWebhookSecret`) unless given `unauthenticated: true`, and
 * then says so in the log: anyone who can reach its port can inject events.
 *
 * Every protocol reply — including `IdConflict`, `Rejected` and `Gap` — is a 200: the status says
 * whether the exchange worked, the body says what the receiver decided. A 4xx means the sender
 * (or something between) is broken, and `HttpTransport` quarantines the event with
 * `Rejected{"http_4xx"}`: it is neither acked nor retried before an operator looks. A 500 is
 * transient: the sender retries.
 *
 * Error messages and the receiver's log lines are one line each. The body is read while it
 * streams, up to `maxRequestBytes` (default `DefaultMaxRequestBytes`: the queue's 1 MiB body
 * limit plus 16 KiB of envelope); past it the receiver answers 413 with `Connection: close` and
 * reads no further. `webhook-id` and `Idempotency-Key` are read as percent-encoded UTF-8 (see
 * `HttpTransport`); a raw key equal to the event id is accepted too.
 */
import * as HttpServer from "@effect/platform/HttpServer"
import type { ServeError } from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Clock, Effect, Either, Layer } from "effect"
import { createServer } from "node:http"
import { InvalidInput } from "../domain/Errors.js"
import type { DeliveryReply } from "../domain/Outcomes.js"
import { Inbox } from "../services/Inbox.js"
import * as Body from "./internal/body.js"
import * as Wire from "./internal/wire.js"
import * as WebhookSignature from "./WebhookSignature.js"

/** The header carrying the event id (checked against the body when present). */
export const IdempotencyKeyHeader = Wire.IdempotencyKeyHeader

export type { ErrorCode } from "./internal/wire.js"
export { ErrorDocument } from "./internal/wire.js"

/** Default request size limit: the queue's default `maxBodyBytes` (1 MiB) plus 16 KiB of envelope. */
export const DefaultMaxRequestBytes: number = Wire.DefaultMaxRequestBytes

/** Options of the handler. */
export interface HandlerOptions {
  /**
   * The secret(s) deliveries are signed with, `whsec_<base64>`; several (a list, or
   * space-separated) are all accepted, for a rotation. Required unless `unauthenticated` is true.
   */
  readonly secrets?: WebhookSignature.SecretsInput | undefined
  /**
   * Accept deliveries without checking any signature: only for a receiver no one else can reach.
   * Must be said explicitly; the handler logs a warning when it is built.
   */
  readonly unauthenticated?: boolean | undefined
  /** How far a delivery's `webhook-timestamp` may be from this receiver's clock, in seconds (default 300). */
  readonly toleranceSeconds?: number | undefined
  /**
   * Largest request body read, in bytes (default `DefaultMaxRequestBytes`). Raise it together
   * with the queue's `maxBodyBytes`, or large events are refused here with 413 after enqueue.
   */
  readonly maxRequestBytes?: number | undefined
}

/** Why a handler could not be built: a bad option, or a missing or malformed secret. */
export type MakeError = InvalidInput | WebhookSignature.MissingWebhookSecret | WebhookSignature.InvalidWebhookSecret

/** The receiver's HTTP app: answers one delivery per request, whatever the path. */
export type Handler = Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest | Inbox>

/** Refuses the request: one WARN line for the receiver's operator, the error document for the sender. */
const refuse = (status: number, error: Wire.ErrorCode, message: string, headers?: Record<string, string>) => {
  const line = Wire.oneLine(message)
  return Effect.as(
    Effect.logWarning(`HttpInbox: ${status} ${error}: ${line}`),
    HttpServerResponse.unsafeJson({ error, message: line } satisfies Wire.ErrorDocument, {
      status,
      ...(headers === undefined ? {} : { headers })
    })
  )
}

// `application/json` or a `+json` type, in UTF-8 (JSON's only interchange encoding, RFC 8259).
const isJsonMediaType = (contentType: string | undefined): boolean => {
  if (contentType === undefined) return false
  const [type = "", ...parameters] = contentType.toLowerCase().split(";").map((part) => part.trim())
  if (type !== "application/json" && !/^application\/[!#$&^_.+\-a-z0-9]+\+json$/.test(type)) return false
  return parameters.every((parameter) => !parameter.startsWith("charset=") || /^charset="?utf-8"?$/.test(parameter))
}

/** The reply as a fair-relay reply document, so `HttpTransport` reads the decision and not only the status. */
const answer = (reply: DeliveryReply) =>
  HttpServerResponse.text(JSON.stringify(reply), { status: 200, contentType: Wire.ReplyMediaType })

interface Settings {
  readonly keys: WebhookSignature.Keys
  readonly toleranceSeconds: number
  readonly maxRequestBytes: number
}

const handle = ({ keys, maxRequestBytes, toleranceSeconds }: Settings): Handler =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (request.method !== "POST") {
      return yield* refuse(405, "method_not_allowed", `deliveries are POSTed, not ${request.method}`, { allow: "POST" })
    }
    const body = yield* Effect.either(Body.readLimited(request, maxRequestBytes))
    if (Either.isLeft(body)) {
      return yield* refuse(400, "malformed_json", `the request body could not be read: ${String(body.left.cause)}`)
    }
    if (body.right._tag === "TooLarge") {
      // `Connection: close`: the rest of the body is not read, so the connection cannot be reused.
      return yield* refuse(413, "payload_too_large", `the request body is larger than ${maxRequestBytes} bytes`, { connection: "close" })
    }
    const bytes = body.right.bytes
    if (WebhookSignature.hasKeys(keys)) {
      const now = Math.floor((yield* Clock.currentTimeMillis) / 1000)
      const verified = WebhookSignature.verify(keys, request.headers, bytes, now, toleranceSeconds)
      if (Either.isLeft(verified)) return yield* refuse(401, "unauthorized", `the delivery is not signed with this receiver's secret: ${verified.left}`)
    }
    const contentType = request.headers["content-type"]
    if (!isJsonMediaType(contentType)) {
      return yield* refuse(
        415,
        "unsupported_media_type",
        `deliveries are application/json (UTF-8), not ${contentType === undefined ? "a body without Content-Type" : JSON.stringify(contentType)}`
      )
    }
    const text = Body.utf8Text(bytes)
    if (text === undefined) {
      return yield* refuse(400, "malformed_json", "the request body is not valid UTF-8")
    }
    const json = Wire.parseJson(text)
    if (Either.isLeft(json)) {
      return yield* refuse(400, "malformed_json", `the request body is not JSON: ${Wire.describeIssues(json.left)}`)
    }
    const document = Wire.decodeDocument(json.right)
    if (Either.isLeft(document)) {
      return yield* refuse(400, "invalid_delivery", `the document is not a delivery: ${Wire.describeIssues(document.left)}`)
    }
    const delivery = document.right
    for (const header of [WebhookSignature.IdHeader, Wire.IdempotencyKeyHeader]) {
      const key = request.headers[header]
      if (key !== undefined && !Wire.keyNames(key, delivery.eventId)) {
        return yield* refuse(400, "idempotency_key_mismatch", `the ${header} header differs from the body's eventId`)
      }
    }
    const annotations = { eventId: delivery.eventId, flowId: delivery.flowId, seq: delivery.seq }
    yield* Effect.annotateCurrentSpan(annotations)
    const inbox = yield* Inbox
    // `receive` validates again (and the body as canonical JSON) for every caller, not only HTTP.
    return yield* inbox.receive(delivery).pipe(
      Effect.map(answer),
      Effect.catchTags({
        InvalidInput: (error) => refuse(400, "invalid_delivery", error.message),
        // The store's message stays in the receiver's log: it is no business of the sender's.
        SqlError: (error) =>
          Effect.as(
            Effect.logError(`HttpInbox: the receiver's store failed: ${Wire.oneLine(errorText(error))}`),
            HttpServerResponse.unsafeJson({ error: "receiver_store", message: "the receiver's store failed; see the receiver's log" } satisfies Wire.ErrorDocument, { status: 500 })
          )
      }),
      Effect.annotateLogs(annotations)
    )
  }).pipe(Effect.withSpan("HttpInbox.handle"))

const errorText = (error: { readonly message: string; readonly cause?: unknown }): string =>
  error.cause instanceof Error && !error.message.includes(error.cause.message) ? `${error.message} (${error.cause.message})` : error.message

const invalid = (message: string) => new InvalidInput({ operation: "HttpInbox.makeHandler", message })

/**
 * Builds the handler with `options`; fails `MissingWebhookSecret` without a secret (unless
 * `unauthenticated: true`), `InvalidWebhookSecret` on a malformed one, `InvalidInput` on a bad
 * limit. Serve it (`HttpServer.serve(handler)`) or mount it on a route of your own server:
 *
 * ```ts
 * const handler = yield* HttpInbox.makeHandler({ secrets: Redacted.make(process.env.WEBHOOK_SECRET!) })
 * HttpRouter.empty.pipe(HttpRouter.post("/deliveries", handler), HttpServer.serve())
 * ```
 */
export const makeHandler = (options: HandlerOptions): Effect.Effect<Handler, MakeError> =>
  Effect.gen(function*() {
    const maxRequestBytes = options.maxRequestBytes ?? DefaultMaxRequestBytes
    if (!Number.isSafeInteger(maxRequestBytes) || maxRequestBytes <= 0) {
      return yield* invalid(`maxRequestBytes: ${String(maxRequestBytes)} is not a positive integer`)
    }
    const toleranceSeconds = options.toleranceSeconds ?? WebhookSignature.DefaultToleranceSeconds
    if (!Number.isSafeInteger(toleranceSeconds) || toleranceSeconds <= 0) {
      return yield* invalid(`toleranceSeconds: ${String(toleranceSeconds)} is not a positive integer`)
    }
    const keys = yield* WebhookSignature.requireKeys("HttpInbox.makeHandler", options.secrets, {
      flag: "unauthenticated",
      given: options.unauthenticated,
      without: "deliveries are accepted without a signature: anyone who can reach this endpoint can inject events"
    })
    return handle({ keys, maxRequestBytes, toleranceSeconds })
  })

/** Serves the handler built with `options` as the whole app of the `HttpServer` in context, for the scope of the layer. */
export const layer = (options: HandlerOptions): Layer.Layer<never, MakeError, HttpServer.HttpServer | Inbox> =>
  Layer.unwrapEffect(Effect.map(makeHandler(options), (app) => HttpServer.serve(app)))

/** Options of `layerServer`. */
export interface ServerOptions extends HandlerOptions {
  /** TCP port; 0 picks a free one (read it back with `url`). Default 0. */
  readonly port?: number | undefined
  /** Interface to bind. Default "127.0.0.1": exposing a receiver beyond the host is a decision. */
  readonly host?: string | undefined
}

/**
 * A Node HTTP server serving `handler`, listening for the scope of the layer; it also provides
 * `HttpServer` so callers can read the bound address (`url`).
 */
export const layerServer = (options: ServerOptions): Layer.Layer<HttpServer.HttpServer, ServeError | MakeError, Inbox> =>
  Layer.provideMerge(
    layer(options),
    NodeHttpServer.layer(() => createServer(), { port: options.port ?? 0, host: options.host ?? "127.0.0.1" })
  )

/** The base URL of the `HttpServer` in context (`http://host:port/`), e.g. to build a transport. */
export const url: Effect.Effect<string, never, HttpServer.HttpServer> = HttpServer.addressWith((address) =>
  address._tag === "TcpAddress"
    ? Effect.succeed(`http://${address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname}:${address.port}/`)
    : Effect.dieMessage(`HttpInbox.url: the server listens on the unix socket ${address.path}, not on TCP`)
)
