/**
 * `fair-relay/http`: delivery over HTTP and the receiver's HTTP endpoint (they load
 * `@effect/platform`'s HTTP client and server); the services they serve come from another entry.
 *
 * @module
 */
/** A Transport over HTTP (@effect/platform HttpClient). */
export * as HttpTransport from "./http/HttpTransport.js"
/** The receiver's HTTP handler and a Node server for it. */
export * as HttpInbox from "./http/HttpInbox.js"
/** Standard Webhooks signatures: signing deliveries and verifying them. */
export * as WebhookSignature from "./http/WebhookSignature.js"
