/**
 * Reading a request body with a size limit, while it streams: once the limit is passed, reading
 * stops — the rest is neither read nor buffered — so a 200 MB request costs the receiver about
 * the limit, not 200 MB.
 */
import type * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as NodeHttpServerRequest from "@effect/platform-node/NodeHttpServerRequest"
import * as NodeStream from "@effect/platform-node/NodeStream"
import { Data, Effect, Stream } from "effect"
import { IncomingMessage } from "node:http"

/** What a limited read found. */
export type Body = Data.TaggedEnum<{
  /** The whole body, as the bytes that came (a signature covers these, not a decoding of them). */
  Complete: { readonly bytes: Uint8Array }
  /** The body passed `limit`; `read` bytes were read, the rest was left on the wire. */
  TooLarge: { readonly read: number }
}>
/** Constructors of `Body`. */
export const Body = Data.taggedEnum<Body>()

/** The body could not be read (the sender went away, the connection broke). */
export class BodyUnreadable extends Data.TaggedError("BodyUnreadable")<{ readonly cause: unknown }> {}

// On a Node server, read the `IncomingMessage` without destroying it when we stop early: a
// destroyed request takes the socket with it, and the 413 would never reach the sender. Other
// servers get the platform's stream (which may drop the connection instead).
const source = (request: HttpServerRequest.HttpServerRequest): Stream.Stream<Uint8Array, unknown> => {
  const incoming: unknown = NodeHttpServerRequest.toIncomingMessage(request)
  return incoming instanceof IncomingMessage
    ? NodeStream.fromReadable<unknown, Uint8Array>(() => incoming, (cause) => cause, { closeOnDone: false })
    : request.stream
}

/** The declared `Content-Length`, when there is a valid one. */
export const declaredLength = (request: HttpServerRequest.HttpServerRequest): number | undefined => {
  const header = request.headers["content-length"]
  return header !== undefined && /^\d+$/.test(header) ? Number(header) : undefined
}

/**
 * Reads the body of `request` until its end or until more than `limit` bytes came, whichever is
 * first. A declared `Content-Length` above the limit is refused before reading anything.
 */
export const readLimited = (
  request: HttpServerRequest.HttpServerRequest,
  limit: number
): Effect.Effect<Body, BodyUnreadable> => {
  const declared = declaredLength(request)
  if (declared !== undefined && declared > limit) return Effect.succeed(Body.TooLarge({ read: 0 }))
  const start: { read: number; readonly chunks: Array<Uint8Array> } = { read: 0, chunks: [] }
  return Stream.runFoldWhile(
    source(request),
    start,
    (state) => state.read <= limit,
    (state, chunk) => {
      state.chunks.push(chunk)
      state.read += chunk.length
      return state
    }
  ).pipe(
    Effect.map(({ chunks, read }) =>
      read > limit ? Body.TooLarge({ read }) : Body.Complete({ bytes: Buffer.concat(chunks) })),
    Effect.mapError((cause) => new BodyUnreadable({ cause }))
  )
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true })

/**
 * The body's text, or `undefined` when it is not valid UTF-8. Decoding leniently would fold
 * every invalid sequence into U+FFFD: two different ids would read as one, and the second
 * delivery would be taken for a duplicate of the first.
 */
export const utf8Text = (bytes: Uint8Array): string | undefined => {
  try {
    return utf8.decode(bytes)
  } catch {
    return undefined
  }
}
