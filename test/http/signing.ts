/**
 * Signing for the HTTP tests, done by the `standardwebhooks` reference library rather than by
 * our own code: a request these helpers sign is one any Standard Webhooks sender would send.
 */
import { Webhook } from "standardwebhooks"

/** The secret the test receivers verify with (32 bytes of 0x2a, as `whsec_<base64>`). */
export const TestSecret = `whsec_${Buffer.alloc(32, 0x2a).toString("base64")}`

/** Another valid secret, which the test receivers do not know. */
export const OtherSecret = `whsec_${Buffer.alloc(32, 0x17).toString("base64")}`

/**
 * The three Standard Webhooks headers for `body`, signed with `secret` by `standardwebhooks`:
 * message id `id` (by default the percent-encoded `eventId` of the body, when it has one), sent `at`.
 */
export const signedHeaders = (
  body: string | Uint8Array,
  options: { readonly secret?: string; readonly id?: string; readonly at?: Date } = {}
): Record<string, string> => {
  const id = options.id ?? idOf(body)
  const at = options.at ?? new Date()
  return {
    "webhook-id": id,
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": new Webhook(options.secret ?? TestSecret).sign(id, at, typeof body === "string" ? body : Buffer.from(body))
  }
}

const idOf = (body: string | Uint8Array): string => {
  try {
    const document = JSON.parse(typeof body === "string" ? body : Buffer.from(body).toString("utf8")) as { readonly eventId?: unknown }
    return typeof document.eventId === "string" && document.eventId !== "" ? encodeURIComponent(document.eventId) : "msg_test"
  } catch {
    return "msg_test"
  }
}
