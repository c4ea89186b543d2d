/**
 * What travels between `HttpTransport` and `HttpInbox`: the request document, the idempotency
 * header and how ids are written into it, the request limits, and the error document of a
 * request the receiver could not take.
 */
import { Either, ParseResult, Schema } from "effect"
import { DefaultMaxBodyBytes } from "../../domain/Json.js"
import { Delivery } from "../../domain/Records.js"

/** The header carrying the event id, so a receiver or proxy can deduplicate before parsing the body. */
export const IdempotencyKeyHeader = "idempotency-key"

/**
 * Writes an event id as a header value: percent-encoded UTF-8 (`encodeURIComponent`, RFC 3986
 * unreserved characters stay as they are). HTTP header values are bytes that clients read as
 * Latin-1 at best — undici and fetch refuse `流-3` outright — so an id travels as `%E6%B5%81-3`;
 * ids made of letters, digits and `-_.!~*'()` travel unchanged.
 */
export const encodeHeaderValue = (id: string): string => encodeURIComponent(id)

/** Reads a header value written by `encodeHeaderValue`; `undefined` when it is not valid percent-encoded UTF-8. */
export const decodeHeaderValue = (value: string): string | undefined => {
  try {
    return decodeURIComponent(value)
  } catch {
    return undefined
  }
}

/**
 * Whether an `Idempotency-Key` names `eventId`: its decoded form, or the raw value from a sender
 * that does not encode (a hand-written `curl -H` of an ASCII id).
 */
export const keyNames = (key: string, eventId: string): boolean => key === eventId || decodeHeaderValue(key) === eventId

/**
 * The media type of a fair-relay reply. A receiver answering with it opts into the richer reply
 * (`Duplicate`, `IdConflict`, `SequenceConflict`, `Gap`, `Rejected{code}`, `Retry{reason}`);
 * any other response is read by its status alone.
 */
export const ReplyMediaType = "application/vnd.fair-relay.reply+json"

/** Whether a `Content-Type` is `ReplyMediaType` (parameters such as `charset` aside). */
export const isReplyMediaType = (contentType: string | undefined): boolean =>
  contentType !== undefined && contentType.split(";")[0]!.trim().toLowerCase() === ReplyMediaType

// Past this a delay means "never" anyway; every policy caps it far lower.
const MaxRetryAfterMillis = Number.MAX_SAFE_INTEGER

/**
 * A `Retry-After` (RFC 9110 §10.2.3) as a delay in milliseconds from `now` (unix ms): delay
 * seconds, or an HTTP date (a date already past is no delay). `undefined` when absent or
 * unreadable: then the policy's backoff alone decides.
 */
export const retryAfterMillis = (value: string | undefined, now: number): number | undefined => {
  if (value === undefined) return undefined
  const text = value.trim()
  if (/^\d+$/.test(text)) return Math.min(MaxRetryAfterMillis, Number(text) * 1000)
  // An HTTP date names a weekday and a month; `Date.parse` alone would also take bare numbers.
  if (!/^[A-Za-z]{3},? /.test(text)) return undefined
  const at = Date.parse(text)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

/** The JSON document one delivery is sent as, with the domain's id and seq rules. */
export const DeliveryDocument = Delivery
/** @see DeliveryDocument */
export type DeliveryDocument = typeof DeliveryDocument.Encoded

/**
 * Room for the envelope around a body (`eventId`, `flowId`, `seq`, keys): ids are at most 200
 * UTF-16 units, so a few KiB at most; 16 KiB leaves a margin for escapes.
 */
export const EnvelopeBytes = 16 * 1024

/** Default request size limit of `HttpInbox`: the queue's default body limit plus the envelope. */
export const DefaultMaxRequestBytes = DefaultMaxBodyBytes + EnvelopeBytes

/** Why the receiver could not take a request (it is not a protocol reply). */
export const ErrorCode = Schema.Literal(
  "malformed_json",
  "invalid_delivery",
  "idempotency_key_mismatch",
  "unauthorized",
  "method_not_allowed",
  "unsupported_media_type",
  "payload_too_large",
  "receiver_store"
)
/** @see ErrorCode */
export type ErrorCode = typeof ErrorCode.Type

/** The body of a 4xx/5xx answer of `HttpInbox`. */
export const ErrorDocument = Schema.Struct({ error: Schema.String, message: Schema.String })
/** @see ErrorDocument */
export type ErrorDocument = typeof ErrorDocument.Type

// eslint-disable-next-line no-control-regex
const controlCharacters = /[\u0000-\u001f\u007f-\u009f]+/g

/** Longest message of an error document or a receiver's log line about a request. */
export const MaxMessageLength = 300

/** One line, at most `MaxMessageLength` characters: error documents and logs never carry a tree. */
export const oneLine = (text: string): string => {
  const line = text
    .replace(/[ \t]*[\r\n]+[\s└├│─]*/g, " › ")
    .replace(controlCharacters, " ")
    .replace(/\s+/g, " ")
    .trim()
  return line.length > MaxMessageLength ? `${line.slice(0, MaxMessageLength - 1)}…` : line
}

/** Each issue as `path: message`, joined on one line (what `ArrayFormatter` sees, not a tree). */
export const describeIssues = (error: ParseResult.ParseError): string => {
  try {
    const issues = ParseResult.ArrayFormatter.formatErrorSync(error)
    return oneLine(issues.map((issue) => (issue.path.length === 0 ? issue.message : `${issue.path.join(".")}: ${issue.message}`)).join("; "))
  } catch {
    return "the document does not have the expected shape (too deeply nested to describe)"
  }
}

/** Parses request text as JSON (any JSON value); the failure is the parser's one-line complaint. */
export const parseJson: (text: string) => Either.Either<unknown, ParseResult.ParseError> = Schema.decodeEither(Schema.parseJson())

/** Decodes a parsed JSON value as a delivery document. */
export const decodeDocument: (value: unknown) => Either.Either<typeof DeliveryDocument.Type, ParseResult.ParseError> =
  Schema.decodeUnknownEither(DeliveryDocument, { errors: "first" })
