/**
 * What travels between `HttpTransport` and `HttpInbox`: the request document, the idempotency
 * header and the error document of a request the receiver could not take.
 */
import { Schema } from "effect"

/** The header carrying the event id, so a receiver or proxy can deduplicate before parsing the body. */
export const IdempotencyKeyHeader = "idempotency-key"

/** The JSON document one delivery is sent as. Ids are checked by the inbox, not here. */
export const DeliveryDocument = Schema.Struct({
  eventId: Schema.String,
  flowId: Schema.String,
  seq: Schema.Number,
  body: Schema.Unknown
})
/** @see DeliveryDocument */
export type DeliveryDocument = typeof DeliveryDocument.Type

/** Why the receiver could not take a request (it is not a protocol reply). */
export const ErrorCode = Schema.Literal(
  "malformed_json",
  "invalid_delivery",
  "idempotency_key_mismatch",
  "method_not_allowed",
  "receiver_store"
)
/** @see ErrorCode */
export type ErrorCode = typeof ErrorCode.Type

/** The body of a 4xx/5xx answer of `HttpInbox`. */
export const ErrorDocument = Schema.Struct({ error: Schema.String, message: Schema.String })
/** @see ErrorDocument */
export type ErrorDocument = typeof ErrorDocument.Type
