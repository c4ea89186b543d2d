/**
 * A `Transport` over HTTP: each delivery is one `POST` of a JSON document to the receiver, with
 * the event id as the idempotency key. Whatever goes wrong on the wire becomes a `Retry` reply,
 * so the queue's budget and backoff decide what happens next — a receiver that cannot be reached
 * or answers nonsense ends in quarantine with a readable reason, and is never acked.
 *
 * | response                                                       | reply                                  |
 * |----------------------------------------------------------------|----------------------------------------|
 * | 2xx, body decodes as a `DeliveryReply`                         | that reply                             |
 * | 2xx, body does not decode                                      | `Retry{"unrecognised reply: http …"}`  |
 * | 4xx (not 408/429), body decodes as a non-ack reply             | that reply (e.g. 409 + `IdConflict`)   |
 * | 4xx, body is an ack (`Accepted`/`Duplicate`) or does not decode | `Retry{"http 4xx: …"}`                |
 * | 408, 429, 5xx, 1xx, 3xx (redirects are not followed)           | `Retry{"http <status>: …"}`            |
 * | no complete response within `timeout`                          | `Retry{"timeout after …"}`             |
 * | connection refused / reset / closed, unreadable body           | `Retry{"transport: …"}`                |
 * | body not encodable as JSON                                     | `Retry{"encode: …"}`                   |
 * | the client throws (a defect of the `HttpClient` in use)        | `Retry{"transport threw: …"}`          |
 *
 * Every failure is first a typed `DeliveryFailed`, then that `Retry`: a delivery never dies.
 *
 * The event id travels in `Idempotency-Key` percent-encoded as UTF-8 (`encodeURIComponent`):
 * `evt-A1` unchanged, `流-3` as `%E6%B5%81-3` — header values cannot carry such ids raw.
 * `HttpInbox` decodes it and checks it against the body's `eventId`.
 *
 * It needs an `HttpClient` in context: `NodeHttpClient.layerUndici` (what the CLI uses) or
 * `NodeHttpClient.layer` from `@effect/platform-node`, or `FetchHttpClient.layer` from
 * `@effect/platform`; all three are tested. Redirects are never followed, `fetch` included.
 *
 * A URL that is not http(s), a timeout that is not a finite positive duration, or an extra
 * header that is not a valid header fail `make` with `InvalidInput`. The timeout runs on
 * Effect's `Clock` (under `TestClock`, adjust it or test live).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import { Config, Duration, Effect, Either, Layer, Option, Schema } from "effect"
import type { ConfigError } from "effect/ConfigError"
import { InvalidInput } from "../domain/Errors.js"
import { DeliveryReply } from "../domain/Outcomes.js"
import type { DeliveryInput } from "../domain/Records.js"
import { catchDefects, DeliveryFailed, Transport } from "../services/Transport.js"
import type { TransportService } from "../services/Transport.js"
import * as Wire from "./internal/wire.js"

/** Options of an HTTP transport. */
export interface HttpTransportOptions {
  /** The receiver's endpoint; every delivery is a `POST` to it. */
  readonly url: string
  /**
   * Longest wait for the whole exchange, from connecting to the last byte of the reply (default
   * 10 seconds). Keep it below the queue's lease, or a slow reply settles `Expired`.
   */
  readonly timeout?: Duration.DurationInput | undefined
  /**
   * Extra request headers (authentication, routing); the transport's own headers win. Values are
   * Latin-1 without control characters; `make` refuses others.
   */
  readonly headers?: Readonly<Record<string, string>> | undefined
}

/** The header carrying the event id, so a receiver or proxy can deduplicate before parsing the body. */
export const IdempotencyKeyHeader = Wire.IdempotencyKeyHeader

/** How an event id is written into `Idempotency-Key`: percent-encoded UTF-8 (`encodeURIComponent`). */
export const encodeIdempotencyKey: (eventId: string) => string = Wire.encodeHeaderValue

/** Reads an `Idempotency-Key` back into the event id; `undefined` when it is not valid percent-encoding. */
export const decodeIdempotencyKey: (key: string) => string | undefined = Wire.decodeHeaderValue

/** Default of `HttpTransportOptions.timeout`. */
export const DefaultTimeout: Duration.Duration = Duration.seconds(10)

/** Longest excerpt of a response body quoted in a `Retry` reason. */
export const MaxReasonExcerpt = 200

/** The JSON document a delivery is sent as (`HttpInbox` reads the same shape). */
export type DeliveryDocument = Wire.DeliveryDocument

const decodeReply = Schema.decodeUnknownEither(Schema.parseJson(DeliveryReply))
const decodeErrorDocument = Schema.decodeUnknownEither(Schema.parseJson(Wire.ErrorDocument))

// Reasons end up in the queue's `reason` column and in logs: one line, bounded.
// eslint-disable-next-line no-control-regex
const controlCharacters = /[\u0000-\u001f\u007f-\u009f]+/g
const excerpt = (text: string): string => {
  const line = text.replace(controlCharacters, " ").trim()
  return line.length > MaxReasonExcerpt ? `${line.slice(0, MaxReasonExcerpt)}…` : line
}

const retry = (reason: string): DeliveryReply => ({ _tag: "Retry", reason })

const withExcerpt = (prefix: string, body: string): string => {
  const quoted = excerpt(body)
  return quoted.length === 0 ? prefix : `${prefix}: ${quoted}`
}

const isAck = (reply: DeliveryReply): boolean => reply._tag === "Accepted" || reply._tag === "Duplicate"

/**
 * Maps a complete HTTP response to a reply (the table in the module comment). Pure, so the
 * mapping is testable without a socket.
 */
export const replyOf = (status: number, body: string): DeliveryReply => classify(status, body).reply

// `answered` is false when the receiver's protocol answer could not be read off the response:
// those are logged, a receiver's own `Retry` is not.
const classify = (status: number, body: string): { readonly reply: DeliveryReply; readonly answered: boolean } => {
  const decoded = decodeReply(body)
  if (status >= 200 && status < 300) {
    return Either.isRight(decoded)
      ? { reply: decoded.right, answered: true }
      : { reply: retry(withExcerpt(`unrecognised reply: http ${status}`, body)), answered: false }
  }
  // A receiver may state a refusal with a 4xx status; an ack under an error status contradicts
  // itself, and 408/429 are transient whatever the body says.
  const clientError = status >= 400 && status < 500 && status !== 408 && status !== 429
  if (clientError && Either.isRight(decoded) && !isAck(decoded.right)) return { reply: decoded.right, answered: true }
  return { reply: retry(statusReason(status, body, decoded)), answered: false }
}

const statusReason = (status: number, body: string, decoded: Either.Either<DeliveryReply, unknown>): string => {
  if (Either.isRight(decoded) && decoded.right._tag === "Retry") return `http ${status}: ${excerpt(decoded.right.reason)}`
  const error = decodeErrorDocument(body)
  if (Either.isRight(error)) return `http ${status}: ${excerpt(`${error.right.error}: ${error.right.message}`)}`
  return withExcerpt(`http ${status}`, body)
}

const causeText = (cause: unknown): string => {
  if (cause instanceof Error) {
    const code = (cause as { readonly code?: unknown }).code
    const nested = (cause as { readonly cause?: unknown }).cause
    const own = typeof code === "string" && !cause.message.includes(code) ? `${code} ${cause.message}` : cause.message
    // undici wraps the socket error ("fetch failed" / "other side closed") around the real one.
    return nested instanceof Error ? `${own} (${causeText(nested)})` : own
  }
  return String(cause)
}

/** Describes a client failure as a `Retry` reason. */
export const reasonOf = (error: HttpClientError.HttpClientError): string => {
  const detail = excerpt(error.description ?? (error.cause === undefined ? error.message : causeText(error.cause)))
  if (error._tag === "ResponseError") return `transport: reading the reply of http ${error.response.status} failed: ${detail}`
  switch (error.reason) {
    case "InvalidUrl":
      return `invalid url: ${detail}`
    case "Encode":
      return `encode: ${detail}`
    case "Transport":
      return `transport: ${detail}`
  }
}

const failed = (delivery: DeliveryInput, message: string, cause: unknown) =>
  new DeliveryFailed({ eventId: delivery.eventId, message, cause })

// `fetch` follows redirects unless told not to; the Node clients never do. A redirected delivery
// is a misconfigured URL: answered `Retry{"http 3xx"}` with every client.
const withoutRedirects = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.flatMap(Effect.serviceOption(FetchHttpClient.RequestInit), (init) =>
    Effect.provideService(self, FetchHttpClient.RequestInit, { ...Option.getOrElse(init, () => ({})), redirect: "manual" }))

const invalid = (message: string) => new InvalidInput({ operation: "HttpTransport.make", message })

// RFC 9110 §5.1 token; field values: visible Latin-1, spaces and tabs (no CR, LF, NUL).
const headerName = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
// eslint-disable-next-line no-control-regex
const headerValue = /^[\t\u0020-\u007e\u0080-\u00ff]*$/

/**
 * Checks the options once, when the transport is built: a URL that cannot work is a
 * configuration error to fail the program's start with, not a reason to retry (and eventually
 * quarantine) every event.
 */
const decodeOptions = (options: HttpTransportOptions) =>
  Effect.gen(function*() {
    const url = yield* Effect.try({ try: () => new URL(options.url), catch: () => invalid(`url: ${JSON.stringify(options.url)} is not a URL`) })
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      return yield* invalid(`url: ${JSON.stringify(url.protocol)} is not http: or https:`)
    }
    const timeout = Duration.decodeUnknown(options.timeout ?? DefaultTimeout)
    if (Option.isNone(timeout) || !Duration.isFinite(timeout.value) || Duration.isZero(timeout.value)) {
      return yield* invalid(`timeout: ${String(options.timeout)} is not a finite positive duration`)
    }
    const headers = options.headers ?? {}
    for (const [name, value] of Object.entries(headers)) {
      if (!headerName.test(name)) return yield* invalid(`headers: ${JSON.stringify(name)} is not a header name`)
      // Only the name is quoted: header values are often credentials.
      if (typeof value !== "string" || !headerValue.test(value)) {
        return yield* invalid(`headers: the value of ${name} is not a header value (Latin-1 without control characters; percent-encode the rest)`)
      }
    }
    // Spans and logs show where deliveries go, never credentials or query tokens in the URL.
    return { headers, timeout: timeout.value, target: `${url.origin}${url.pathname}` }
  })

/** Builds an HTTP transport over the `HttpClient` in context; fails `InvalidInput` on a bad URL, timeout or header. */
export const make = (options: HttpTransportOptions): Effect.Effect<TransportService, InvalidInput, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const { headers, target, timeout } = yield* decodeOptions(options)
    const client = yield* HttpClient.HttpClient
    const timeoutReason = `timeout after ${Duration.format(timeout)}`
    const base = HttpClientRequest.post(options.url).pipe(
      HttpClientRequest.setHeaders(headers),
      HttpClientRequest.acceptJson
    )

    const exchange = (delivery: DeliveryInput) =>
      Effect.gen(function*() {
        const document: Wire.DeliveryDocument = {
          eventId: delivery.eventId,
          flowId: delivery.flowId,
          seq: delivery.seq,
          body: delivery.body
        }
        const request = yield* HttpClientRequest.bodyJson(
          HttpClientRequest.setHeader(base, Wire.IdempotencyKeyHeader, Wire.encodeHeaderValue(delivery.eventId)),
          document
        ).pipe(Effect.mapError((error) => failed(delivery, `encode: ${excerpt(causeText(error.reason.error))}`, error)))
        const response = yield* Effect.mapError(client.execute(request), (error) => failed(delivery, reasonOf(error), error))
        const text = yield* Effect.mapError(response.text, (error) => failed(delivery, reasonOf(error), error))
        return { status: response.status, text }
      }).pipe(withoutRedirects)

    const deliver = (delivery: DeliveryInput): Effect.Effect<DeliveryReply> =>
      exchange(delivery).pipe(
        Effect.timeoutOption(timeout),
        // A client that throws (a header it cannot write, a bug) fails this delivery, not the worker.
        catchDefects(delivery.eventId),
        Effect.flatMap(Option.match({
          onNone: () => Effect.as(Effect.logWarning(`HttpTransport: no reply in time: ${timeoutReason}`), retry(timeoutReason)),
          onSome: ({ status, text }) => {
            const { answered, reply } = classify(status, text)
            return answered
              ? Effect.succeed(reply)
              : Effect.as(Effect.logWarning(`HttpTransport: no usable reply: ${reply._tag === "Retry" ? reply.reason : reply._tag}`), reply)
          }
        })),
        Effect.catchTag("DeliveryFailed", (error) => {
          const reason = excerpt(error.message)
          // The reason says it all; the request itself (headers may carry credentials) is not logged.
          return Effect.as(Effect.logWarning(`HttpTransport: delivery failed: ${reason}`), retry(reason))
        }),
        Effect.tap((reply) => Effect.annotateCurrentSpan("reply", reply._tag)),
        Effect.annotateLogs({ eventId: delivery.eventId, flowId: delivery.flowId, seq: delivery.seq }),
        Effect.withSpan("HttpTransport.deliver", {
          attributes: { eventId: delivery.eventId, flowId: delivery.flowId, seq: delivery.seq, target }
        })
      )

    return { deliver } satisfies TransportService
  })

/** A layer providing `Transport` over HTTP, using the `HttpClient` in context. */
export const layer = (options: HttpTransportOptions): Layer.Layer<Transport, InvalidInput, HttpClient.HttpClient> =>
  Layer.effect(Transport, make(options))

/** Like `layer`, reading its options from `Config`. */
export const layerConfig = (
  config: Config.Config.Wrap<HttpTransportOptions>
): Layer.Layer<Transport, ConfigError | InvalidInput, HttpClient.HttpClient> =>
  Layer.effect(Transport, Effect.flatMap(Config.unwrap(config), make))
