/**
 * A `Transport` over HTTP: each delivery is one `POST` of a JSON document to the receiver,
 * signed as Standard Webhooks do (see `WebhookSignature`), with the event id as `webhook-id` and
 * `Idempotency-Key` on every attempt. Any webhook endpoint is a receiver: the status decides, as
 * every webhook sender reads it.
 *
 * | response                                                         | reply                                         |
 * |------------------------------------------------------------------|-----------------------------------------------|
 * | 2xx, any body or none                                            | `Accepted`                                    |
 * | 408, 425, 429, 5xx                                               | `Retry{"http <status>…", retryAfter}`         |
 * | 3xx (redirects are not followed), other 4xx                      | `Rejected{"http_<status>"}` → quarantine      |
 * | 1xx, or a status outside 100–599                                | `Retry{"http <status>"}`                      |
 * | a reply body over `MaxReplyBytes`                                | `Retry{"reply larger than …"}`                |
 * | no complete response within `timeout`                            | `Retry{"timeout after …"}`                    |
 * | connection refused / reset / closed, unreadable body             | `Retry{"transport: …"}`                       |
 * | body not encodable as JSON                                       | `Retry{"encode: …"}`                          |
 * | the client throws (a defect of the `HttpClient` in use)          | `Retry{"transport threw: …"}`                 |
 *
 * `Retry-After` (seconds or an HTTP date) becomes the Retry's `retryAfter` in milliseconds: the
 * queue waits at least that long, capped by its policy's `backoffCap`.
 *
 * A receiver that wants to say more — a duplicate, a conflict, a gap, a refusal with its own code —
 * answers with `Content-Type: application/vnd.fair-relay.reply+json` (`ReplyMediaType`) and a
 * `DeliveryReply` document (what `HttpInbox` does):
 *
 * | response with the fair-relay reply media type                    | reply                                         |
 * |------------------------------------------------------------------|-----------------------------------------------|
 * | 2xx, body decodes as a `DeliveryReply`                           | that reply                                    |
 * | 4xx (not 408/425/429), body decodes as a non-ack reply           | that reply (e.g. 409 + `IdConflict`)          |
 * | 4xx with an ack, 408/425/429/5xx                                 | `Retry{"http <status>: …"}`                   |
 * | body does not decode                                             | `Retry{"unrecognised reply: http …"}`         |
 *
 * Every failure is first a typed `DeliveryFailed`, then that `Retry`: a delivery never dies. The
 * reply is read up to `MaxReplyBytes`; past it the connection is dropped, not read to its end.
 *
 * The event id travels percent-encoded as UTF-8 (`encodeURIComponent`): `evt-A1` unchanged, `流-3`
 * as `%E6%B5%81-3` — header values cannot carry such ids raw. `HttpInbox` decodes it and checks it
 * against the body's `eventId`.
 *
 * It needs an `HttpClient` in context: `NodeHttpClient.layerUndici` (what the CLI uses) or
 * `NodeHttpClient.layer` from `@effect/platform-node`, or `FetchHttpClient.layer` from
 * `@effect/platform`; all three are tested. Redirects are never followed, `fetch` included.
 *
 * A URL that is not http(s), a timeout that is not a finite positive duration, or an extra
 * header that is not a valid header fail `make` with `InvalidInput`; no secret (and no explicit
 * `unsigned: true`) fails it with `MissingWebhookSecret`. The timeout and the signature's
 * timestamp run on Effect's `Clock` (under `TestClock`, adjust it or test live).
 */
import * as FetchHttpClient from "@effect/platform/FetchHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import { Clock, Config, Duration, Effect, Either, Layer, Option, Redacted, Schema, Stream } from "effect"
import type { ConfigError } from "effect/ConfigError"
import { InvalidInput } from "../domain/Errors.js"
import { DeliveryReply } from "../domain/Outcomes.js"
import type { DeliveryInput } from "../domain/Records.js"
import { catchDefects, DeliveryFailed, Transport } from "../services/Transport.js"
import type { TransportService } from "../services/Transport.js"
import * as Wire from "./internal/wire.js"
import * as WebhookSignature from "./WebhookSignature.js"

/** Options of an HTTP transport. */
export interface HttpTransportOptions {
  /** The receiver's endpoint; every delivery is a `POST` to it. */
  readonly url: string
  /**
   * The signing secret(s), `whsec_<base64>`; several (a list, or space-separated) sign every
   * delivery with each of them, for a rotation. Required unless `unsigned` is true.
   */
  readonly secrets?: WebhookSignature.SecretsInput | undefined
  /**
   * Send deliveries without a `webhook-signature`: only for a receiver that cannot be reached by
   * anyone else. Must be said explicitly; the transport logs a warning when it starts.
   */
  readonly unsigned?: boolean | undefined
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

/** The media type of a fair-relay reply: a receiver answering with it is read for a `DeliveryReply`. */
export const ReplyMediaType = Wire.ReplyMediaType

/** How an event id is written into `Idempotency-Key` and `webhook-id`: percent-encoded UTF-8 (`encodeURIComponent`). */
export const encodeIdempotencyKey: (eventId: string) => string = Wire.encodeHeaderValue

/** Reads an `Idempotency-Key` back into the event id; `undefined` when it is not valid percent-encoding. */
export const decodeIdempotencyKey: (key: string) => string | undefined = Wire.decodeHeaderValue

/** Default of `HttpTransportOptions.timeout`. */
export const DefaultTimeout: Duration.Duration = Duration.seconds(10)

/** Longest excerpt of a response body quoted in a `Retry` reason. */
export const MaxReasonExcerpt = 200

/** Largest reply body read, in bytes; a longer one is a `Retry`, and the rest is not read. */
export const MaxReplyBytes = 64 * 1024

export type { DeliveryDocument } from "./internal/wire.js"

const decodeReply = Schema.decodeUnknownEither(Schema.parseJson(DeliveryReply))
const decodeErrorDocument = Schema.decodeUnknownEither(Schema.parseJson(Wire.ErrorDocument))

// Reasons end up in the queue's `reason` column and in logs: one line, bounded.
// eslint-disable-next-line no-control-regex
const controlCharacters = /[\u0000-\u001f\u007f-\u009f]+/g
const excerpt = (text: string): string => {
  const line = text.replace(controlCharacters, " ").trim()
  return line.length > MaxReasonExcerpt ? `${line.slice(0, MaxReasonExcerpt)}…` : line
}

const retry = (reason: string, retryAfter?: number | undefined): DeliveryReply =>
  retryAfter === undefined ? { _tag: "Retry", reason } : { _tag: "Retry", reason, retryAfter }

const withExcerpt = (prefix: string, body: string): string => {
  const quoted = excerpt(body)
  return quoted.length === 0 ? prefix : `${prefix}: ${quoted}`
}

const isAck = (reply: DeliveryReply): boolean => reply._tag === "Accepted" || reply._tag === "Duplicate"

/** What of a response the mapping reads, besides its status and body. */
export interface ReplyHeaders {
  /** The reply's media type: the protocol's reply type, or another. */
  readonly "content-type"?: string | undefined
  /** When to retry (seconds or an HTTP date), for a `Retry`. */
  readonly "retry-after"?: string | undefined
}

/**
 * Maps a complete HTTP response to a reply (the tables in the module comment). `now` (unix
 * milliseconds) turns a `Retry-After` date into a delay. Pure, so the mapping is testable
 * without a socket.
 */
export const replyOf = (status: number, body: string, headers: ReplyHeaders = {}, now = 0): DeliveryReply =>
  classify(status, body, headers, now).reply

// Statuses that say "not now" rather than "never" (RFC 9110 §15.5.9, RFC 8470, RFC 6585).
const transient = (status: number): boolean => status === 408 || status === 425 || status === 429 || (status >= 500 && status < 600)

// `note`, when present, is logged (at Debug for a Retry): the receiver did not answer with a protocol reply of its own.
const classify = (
  status: number,
  body: string,
  headers: ReplyHeaders,
  now: number
): { readonly reply: DeliveryReply; readonly note?: string | undefined } => {
  const retryAfter = Wire.retryAfterMillis(headers["retry-after"], now)
  if (Wire.isReplyMediaType(headers["content-type"])) return classifyReply(status, body, retryAfter)
  if (status >= 200 && status < 300) return { reply: { _tag: "Accepted" } }
  if (transient(status)) {
    const reason = statusReason(status, body)
    return { reply: retry(reason, retryAfter), note: reason }
  }
  if ((status >= 300 && status < 400) || (status >= 400 && status < 500)) {
    // The code is what an operator filters quarantines by; the receiver's words go to the log.
    return { reply: { _tag: "Rejected", code: `http_${status}` }, note: statusReason(status, body) }
  }
  const reason = withExcerpt(`http ${status}`, body)
  return { reply: retry(reason), note: reason }
}

// A receiver that opted into the fair-relay reply: its document decides, within what its status allows.
const classifyReply = (status: number, body: string, retryAfter: number | undefined) => {
  const decoded = decodeReply(body)
  if (Either.isLeft(decoded)) {
    const reason = withExcerpt(`unrecognised reply: http ${status}`, body)
    return { reply: retry(reason, retryAfter), note: reason }
  }
  const reply = decoded.right
  const withDelay = reply._tag === "Retry" && reply.retryAfter === undefined && retryAfter !== undefined
    ? { ...reply, retryAfter }
    : reply
  if (status >= 200 && status < 300) return { reply: withDelay }
  // A refusal may come with a 4xx status; an ack under an error status contradicts itself, and a
  // transient status is transient whatever the body says.
  if (status >= 400 && status < 500 && !transient(status) && !isAck(reply)) return { reply: withDelay }
  const reason = reply._tag === "Retry" ? `http ${status}: ${excerpt(reply.reason)}` : withExcerpt(`http ${status}`, body)
  return { reply: retry(reason, reply._tag === "Retry" && reply.retryAfter !== undefined ? reply.retryAfter : retryAfter), note: reason }
}

const statusReason = (status: number, body: string): string => {
  const error = decodeErrorDocument(body)
  if (Either.isRight(error)) return `http ${status}: ${excerpt(`${error.right.error}: ${error.right.message}`)}`
  return withExcerpt(`http ${status}`, body)
}

const causeText = (cause: unknown): string => {
  if (cause instanceof Error) {
    const code = "code" in cause ? cause.code : undefined
    const nested = cause.cause
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

/** A reply body as far as it was read: whole, or cut off past `MaxReplyBytes`. */
type ReplyBody = { readonly _tag: "Complete"; readonly text: string } | { readonly _tag: "TooLarge" }

/**
 * Reads at most `MaxReplyBytes` (plus the chunk that passes it) of a reply. Ending the stream
 * early aborts the request, so the connection is dropped rather than read to its end: a receiver
 * answering 100 MB costs the worker about 64 KiB.
 */
const readBounded = (response: HttpClientResponse.HttpClientResponse): Effect.Effect<ReplyBody, HttpClientError.ResponseError> => {
  const declared = response.headers["content-length"]
  // No body by definition (`fetch` gives these no stream at all).
  if (response.status === 204 || response.status === 205 || response.status === 304 || declared === "0") {
    return Effect.succeed({ _tag: "Complete", text: "" })
  }
  const tooLarge = declared !== undefined && /^\d+$/.test(declared) && Number(declared) > MaxReplyBytes
  const start: { read: number; readonly chunks: Array<Uint8Array> } = { read: 0, chunks: [] }
  return Stream.runFoldWhile(
    response.stream,
    start,
    (state) => !tooLarge && state.read <= MaxReplyBytes,
    (state, chunk) => {
      state.chunks.push(chunk)
      state.read += chunk.length
      return state
    }
  ).pipe(Effect.map(({ chunks, read }): ReplyBody =>
    tooLarge || read > MaxReplyBytes ? { _tag: "TooLarge" } : { _tag: "Complete", text: Buffer.concat(chunks).toString("utf8") }
  ))
}

// `fetch` follows redirects unless told not to; the Node clients never do. A redirected delivery
// is a misconfigured URL: answered `Rejected{"http_3xx"}` with every client.
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
    const keys = yield* WebhookSignature.requireKeys("HttpTransport.make", options.secrets, {
      flag: "unsigned",
      given: options.unsigned,
      without: "deliveries are sent without a webhook-signature: a receiver that verifies refuses them"
    })
    // Spans and logs show where deliveries go, never credentials or query tokens in the URL.
    return { headers, keys, timeout: timeout.value, target: `${url.origin}${url.pathname}` }
  })

/** Errors of `make`: a bad option, or a missing or malformed secret. */
export type MakeError = InvalidInput | WebhookSignature.MissingWebhookSecret | WebhookSignature.InvalidWebhookSecret

/** Builds an HTTP transport over the `HttpClient` in context; fails on a bad URL, timeout, header or secret. */
export const make = (options: HttpTransportOptions): Effect.Effect<TransportService, MakeError, HttpClient.HttpClient> =>
  Effect.gen(function*() {
    const { headers, keys, target, timeout } = yield* decodeOptions(options)
    const client = yield* HttpClient.HttpClient
    const timeoutReason = `timeout after ${Duration.format(timeout)}`
    const signed = WebhookSignature.hasKeys(keys)
    const base = HttpClientRequest.post(options.url).pipe(
      HttpClientRequest.setHeaders(headers),
      HttpClientRequest.acceptJson
    )

    const exchange = (delivery: DeliveryInput) =>
      Effect.gen(function*() {
        // `previousSeq` only when discards skipped seqs: every other document stays as it was.
        const document: Wire.DeliveryDocument = delivery.previousSeq === undefined
          ? { eventId: delivery.eventId, flowId: delivery.flowId, seq: delivery.seq, body: delivery.body }
          : { eventId: delivery.eventId, flowId: delivery.flowId, seq: delivery.seq, body: delivery.body, previousSeq: delivery.previousSeq }
        // The signature covers the exact bytes sent, so the body is encoded here, once.
        const bytes = yield* Effect.try({
          try: () => Buffer.from(JSON.stringify(document), "utf8"),
          catch: (error) => failed(delivery, `encode: ${excerpt(causeText(error))}`, error)
        })
        const id = Wire.encodeHeaderValue(delivery.eventId)
        const timestamp = Math.floor((yield* Clock.currentTimeMillis) / 1000)
        const request = base.pipe(
          HttpClientRequest.setHeader(Wire.IdempotencyKeyHeader, id),
          HttpClientRequest.setHeader(WebhookSignature.IdHeader, id),
          HttpClientRequest.setHeader(WebhookSignature.TimestampHeader, String(timestamp)),
          signed ? HttpClientRequest.setHeader(WebhookSignature.SignatureHeader, WebhookSignature.sign(keys, id, timestamp, bytes)) : (r) => r,
          HttpClientRequest.bodyUint8Array(bytes, "application/json")
        )
        const response = yield* Effect.mapError(client.execute(request), (error) => failed(delivery, reasonOf(error), error))
        const body = yield* Effect.mapError(readBounded(response), (error) => failed(delivery, reasonOf(error), error))
        if (body._tag === "TooLarge") {
          return yield* failed(delivery, `reply larger than ${MaxReplyBytes} bytes (http ${response.status}): not read`, undefined)
        }
        return {
          status: response.status,
          text: body.text,
          headers: { "content-type": response.headers["content-type"], "retry-after": response.headers["retry-after"] },
          now: yield* Clock.currentTimeMillis
        }
      }).pipe(withoutRedirects)

    const deliver = (delivery: DeliveryInput): Effect.Effect<DeliveryReply> =>
      exchange(delivery).pipe(
        Effect.timeoutOption(timeout),
        // A client that throws (a header it cannot write, a bug) fails this delivery, not the worker.
        catchDefects(delivery.eventId),
        Effect.flatMap(Option.match({
          // A Retry is logged at Debug: the reason travels with the reply, and `Relay.run` tells each
          // flow's retries at Warn once per interval (a receiver that is down fails every delivery).
          onNone: () => Effect.as(Effect.logDebug(`HttpTransport: no reply in time: ${timeoutReason}`), retry(timeoutReason)),
          onSome: ({ headers, now, status, text }) => {
            const { note, reply } = classify(status, text, headers, now)
            return note === undefined
              ? Effect.succeed(reply)
              : Effect.as((reply._tag === "Retry" ? Effect.logDebug : Effect.logWarning)(`HttpTransport: ${replyText(reply)}: ${note}`), reply)
          }
        })),
        Effect.catchTag("DeliveryFailed", (error) => {
          const reason = excerpt(error.message)
          // The reason says it all; the request itself (headers may carry credentials) is not logged.
          return Effect.as(Effect.logDebug(`HttpTransport: delivery failed: ${reason}`), retry(reason))
        }),
        Effect.tap((reply) => Effect.annotateCurrentSpan("reply", reply._tag)),
        Effect.annotateLogs({ eventId: delivery.eventId, flowId: delivery.flowId, seq: delivery.seq }),
        Effect.withSpan("HttpTransport.deliver", {
          attributes: { eventId: delivery.eventId, flowId: delivery.flowId, seq: delivery.seq, target }
        })
      )

    return { deliver } satisfies TransportService
  })

const replyText = (reply: DeliveryReply): string =>
  reply._tag === "Rejected" ? `Rejected ${reply.code}` : reply._tag === "Retry" ? "Retry" : reply._tag

/** A layer providing `Transport` over HTTP, using the `HttpClient` in context. */
export const layer = (options: HttpTransportOptions): Layer.Layer<Transport, MakeError, HttpClient.HttpClient> =>
  Layer.effect(Transport, make(options))

/**
 * Like `layer`, reading its options from `Config`. `configSecrets` reads the secrets redacted,
 * e.g. `configSecrets("FAIR_RELAY_WEBHOOK_SECRET")` (space-separated for a rotation).
 */
export const layerConfig = (
  config: Config.Config.Wrap<HttpTransportOptions>
): Layer.Layer<Transport, ConfigError | MakeError, HttpClient.HttpClient> =>
  Layer.effect(Transport, Effect.flatMap(Config.unwrap(config), make))

/** The signing secrets from configuration `name`, redacted (`whsec_…`, space-separated for a rotation). */
export const configSecrets = (name: string): Config.Config<Redacted.Redacted<string>> => Config.redacted(name)
