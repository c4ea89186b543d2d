/**
 * The receiver's side of `HttpTransport`: an HTTP handler that hands each `POST`ed delivery to
 * `Inbox.receive` and answers with its reply.
 *
 * | request                                                          | status | body                             |
 * |------------------------------------------------------------------|--------|----------------------------------|
 * | any delivery the inbox answered (every `DeliveryReply`)          | 200    | the reply, e.g. `{"_tag":"Accepted"}` |
 * | not a `POST`                                                     | 405    | `{"error":"method_not_allowed",…}` |
 * | body is not JSON                                                 | 400    | `{"error":"malformed_json",…}`   |
 * | `Idempotency-Key` present and not the body's `eventId`           | 400    | `{"error":"idempotency_key_mismatch",…}` |
 * | the inbox refuses the input (`InvalidInput`: bad id, seq, body)  | 400    | `{"error":"invalid_delivery",…}` |
 * | the receiver's database failed (`SqlError`)                      | 500    | `{"error":"receiver_store",…}`   |
 *
 * Every protocol reply — including `IdConflict`, `Rejected` and `Gap` — is a 200: the status says
 * whether the exchange worked, the body says what the receiver decided. A 400 means the sender
 * (or something between) is broken; it is not a protocol reply, so `HttpTransport` maps it to
 * `Retry` and the queue's budget quarantines the event with the 400's reason: it is neither
 * acked nor refused for good before an operator looks. A 500 is transient: the sender retries.
 */
import * as HttpServer from "@effect/platform/HttpServer"
import type { ServeError } from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Effect, Layer } from "effect"
import { createServer } from "node:http"
import type { DeliveryInput } from "../domain/Records.js"
import { Inbox } from "../services/Inbox.js"
import * as Wire from "./internal/wire.js"

/** The header carrying the event id (checked against the body when present). */
export const IdempotencyKeyHeader = Wire.IdempotencyKeyHeader

/** Why the receiver could not take a request. */
export type ErrorCode = Wire.ErrorCode

/** The body of a 4xx/5xx answer. */
export const ErrorDocument = Wire.ErrorDocument
/** @see ErrorDocument */
export type ErrorDocument = Wire.ErrorDocument

const failure = (status: number, error: Wire.ErrorCode, message: string, headers?: Record<string, string>) =>
  HttpServerResponse.unsafeJson({ error, message } satisfies Wire.ErrorDocument, {
    status,
    ...(headers === undefined ? {} : { headers })
  })

const describe = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

const eventIdOf = (document: unknown): unknown =>
  typeof document === "object" && document !== null && !Array.isArray(document)
    ? (document as { readonly eventId?: unknown }).eventId
    : undefined

/**
 * The handler: an `HttpApp` answering one delivery, whatever the path. Serve it as the whole app
 * (`layer`, `layerServer`) or mount it on a route of your own server:
 *
 * ```ts
 * HttpRouter.empty.pipe(HttpRouter.post("/deliveries", HttpInbox.handler), HttpServer.serve())
 * ```
 */
export const handler: Effect.Effect<HttpServerResponse.HttpServerResponse, never, HttpServerRequest.HttpServerRequest | Inbox> =
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (request.method !== "POST") {
      return failure(405, "method_not_allowed", `deliveries are POSTed, not ${request.method}`, { allow: "POST" })
    }
    // An empty body is no JSON document (`request.json` would read it as null).
    const text = yield* Effect.either(request.text)
    const document = text._tag === "Left"
      ? text
      : yield* Effect.either(Effect.try({ try: () => JSON.parse(text.right) as unknown, catch: (cause) => ({ cause, message: "not JSON" }) }))
    if (document._tag === "Left") {
      // Only the parser's complaint: the request object would put its headers (credentials) in the log.
      yield* Effect.logWarning("HttpInbox: request body is not JSON", describe(document.left.cause ?? document.left.message))
      return failure(400, "malformed_json", "the request body is not JSON")
    }
    const eventId = eventIdOf(document.right)
    const key = request.headers[Wire.IdempotencyKeyHeader]
    if (key !== undefined && key !== eventId) {
      yield* Effect.logWarning("HttpInbox: idempotency key differs from the body's eventId")
      return failure(400, "idempotency_key_mismatch", "the Idempotency-Key header differs from the body's eventId")
    }
    const annotations: Record<string, string> = typeof eventId === "string" ? { eventId } : {}
    yield* Effect.annotateCurrentSpan(annotations)
    const inbox = yield* Inbox
    // `receive` validates the whole document (ids, seq, body) against the domain schemas.
    return yield* inbox.receive(document.right as DeliveryInput).pipe(
      Effect.map((reply) => HttpServerResponse.unsafeJson(reply)),
      Effect.catchTags({
        InvalidInput: (error) =>
          Effect.as(
            Effect.logWarning("HttpInbox: invalid delivery", error.message),
            failure(400, "invalid_delivery", error.message)
          ),
        // The store's message stays in the receiver's log: it is no business of the sender's.
        SqlError: (error) =>
          Effect.as(
            Effect.logError("HttpInbox: the receiver's store failed", error),
            failure(500, "receiver_store", "the receiver's store failed; see the receiver's log")
          )
      }),
      Effect.annotateLogs(annotations)
    )
  }).pipe(Effect.withSpan("HttpInbox.handle"))

/** Serves `handler` as the whole app of the `HttpServer` in context, for the scope of the layer. */
export const layer: Layer.Layer<never, never, HttpServer.HttpServer | Inbox> = HttpServer.serve(handler)

/** Options of `layerServer`. */
export interface ServerOptions {
  /** TCP port; 0 picks a free one (read it back with `url`). Default 0. */
  readonly port?: number | undefined
  /** Interface to bind. Default "127.0.0.1": exposing a receiver beyond the host is a decision. */
  readonly host?: string | undefined
}

/**
 * A Node HTTP server serving `handler`, listening for the scope of the layer; it also provides
 * `HttpServer` so callers can read the bound address (`url`).
 */
export const layerServer = (options: ServerOptions = {}) =>
  Layer.provideMerge(
    layer,
    NodeHttpServer.layer(() => createServer(), { port: options.port ?? 0, host: options.host ?? "127.0.0.1" })
  ) satisfies Layer.Layer<HttpServer.HttpServer, ServeError, Inbox>

/** The base URL of the `HttpServer` in context (`http://host:port/`), e.g. to build a transport. */
export const url: Effect.Effect<string, never, HttpServer.HttpServer> = HttpServer.addressWith((address) =>
  address._tag === "TcpAddress"
    ? Effect.succeed(`http://${address.hostname.includes(":") ? `[${address.hostname}]` : address.hostname}:${address.port}/`)
    : Effect.dieMessage(`HttpInbox.url: the server listens on the unix socket ${address.path}, not on TCP`)
)
