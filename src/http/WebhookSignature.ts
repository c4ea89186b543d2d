/**
 * Standard Webhooks v1 signatures (https://www.standardwebhooks.com): what `HttpTransport` puts
 * on every delivery and what `HttpInbox` checks before it reads a byte of the body as JSON.
 *
 * A delivery carries three headers:
 *
 * - `webhook-id`: the event id (percent-encoded like `Idempotency-Key`), the same on every retry,
 *   so a receiver deduplicates on it;
 * - `webhook-timestamp`: when this attempt was sent, in unix seconds;
 * - `webhook-signature`: `v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`, one per secret,
 *   space-separated — during a rotation the sender signs with the old and the new secret, and a
 *   receiver that knows either accepts.
 *
 * Secrets are written `whsec_<base64 of the key>` (what Svix, the `standardwebhooks` libraries
 * and their CLIs use). Several secrets in one string are separated by spaces, so one environment
 * variable can hold a rotation. Secrets are never shown in errors or logs.
 */
import { Effect, Either, Redacted, Schema } from "effect"
import { createHmac, timingSafeEqual } from "node:crypto"

/** The header naming the message: the event id, the same on every attempt. */
export const IdHeader = "webhook-id"
/** The header carrying the attempt's send time, in unix seconds. */
export const TimestampHeader = "webhook-timestamp"
/** The header carrying the signatures, `v1,<base64>` separated by spaces. */
export const SignatureHeader = "webhook-signature"

/** The prefix of a secret written as Standard Webhooks does. */
export const SecretPrefix = "whsec_"

/** How far a delivery's timestamp may be from the receiver's clock (either way), in seconds. */
export const DefaultToleranceSeconds = 5 * 60

/** One or more `whsec_…` secrets: a string (space-separated for a rotation), redacted or not, or a list of them. */
export type SecretsInput = string | Redacted.Redacted<string> | ReadonlyArray<string | Redacted.Redacted<string>>

/** The decoded keys of a set of secrets; opaque, and redacted when printed. */
export interface Keys {
  /** The secrets' key bytes, one per secret. */
  readonly keys: ReadonlyArray<Redacted.Redacted<Buffer>>
}

/**
 * A sender or receiver was given no signing secret and not told to go without one: it refuses
 * to start rather than send or accept deliveries anyone could forge.
 */
export class MissingWebhookSecret extends Schema.TaggedError<MissingWebhookSecret>()("MissingWebhookSecret", {
  /** What needed a secret. */
  operation: Schema.String,
  message: Schema.String
}) {}

/** A secret that is not `whsec_` followed by non-empty standard base64; the secret itself is not quoted. */
export class InvalidWebhookSecret extends Schema.TaggedError<InvalidWebhookSecret>()("InvalidWebhookSecret", {
  /** What was given the secret. */
  operation: Schema.String,
  message: Schema.String
}) {}

const base64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/

/**
 * Reads secrets given as a user writes them. Fails with `InvalidWebhookSecret` naming which one
 * (by position) is malformed; an input with no secret at all gives no keys.
 */
export const decodeSecrets = (input: SecretsInput, operation: string): Either.Either<Keys, InvalidWebhookSecret> => {
  const given = (typeof input === "string" || Redacted.isRedacted(input) ? [input] : input)
    .flatMap((item) => (Redacted.isRedacted(item) ? Redacted.value(item) : item).split(/\s+/))
    .filter((secret) => secret.length > 0)
  const keys: Array<Redacted.Redacted<Buffer>> = []
  for (const [i, secret] of given.entries()) {
    const encoded = secret.startsWith(SecretPrefix) ? secret.slice(SecretPrefix.length) : undefined
    if (encoded === undefined || encoded.length === 0 || !base64.test(encoded)) {
      return Either.left(new InvalidWebhookSecret({
        operation,
        message: `secret ${i + 1} of ${given.length} is not ${SecretPrefix} followed by base64 (e.g. ${SecretPrefix}${
          Buffer.alloc(24).toString("base64")
        })`
      }))
    }
    keys.push(Redacted.make(Buffer.from(encoded, "base64")))
  }
  return Either.right({ keys })
}

/** Whether there is at least one key to sign or verify with. */
export const hasKeys = (keys: Keys): boolean => keys.keys.length > 0

/** The explicit opt-out of signatures of a sender (`unsigned`) or a receiver (`unauthenticated`). */
export interface OptOut {
  /** The option's name. */
  readonly flag: string
  /** Its value as given. */
  readonly given: boolean | undefined
  /** What going without means, for the warning and the error. */
  readonly without: string
}

/**
 * The keys to sign or verify with: at least one secret, or none when the opt-out is said
 * explicitly — then a warning is logged, once, when the sender or receiver starts. Secrets and
 * the opt-out together contradict each other.
 */
export const requireKeys = (
  operation: string,
  secrets: SecretsInput | undefined,
  optOut: OptOut
): Effect.Effect<Keys, MissingWebhookSecret | InvalidWebhookSecret> =>
  Effect.gen(function*() {
    const keys = yield* decodeSecrets(secrets ?? [], operation)
    if (hasKeys(keys)) {
      if (optOut.given === true) {
        return yield* new InvalidWebhookSecret({ operation, message: `${optOut.flag}: true contradicts the secrets given` })
      }
      return keys
    }
    if (optOut.given !== true) {
      return yield* new MissingWebhookSecret({
        operation,
        message: `no webhook secret: give secrets (${SecretPrefix}…), or ${optOut.flag}: true to go without (${optOut.without})`
      })
    }
    yield* Effect.logWarning(`${operation}: ${optOut.flag}: true — ${optOut.without}`)
    return keys
  })

const hmac = (key: Redacted.Redacted<Buffer>, id: string, timestamp: number, body: Uint8Array): Buffer =>
  createHmac("sha256", Redacted.value(key)).update(`${id}.${timestamp}.`).update(body).digest()

/** The `webhook-signature` value for one message: `v1,<base64>` per key, separated by spaces. */
export const sign = (keys: Keys, id: string, timestamp: number, body: Uint8Array): string =>
  keys.keys.map((key) => `v1,${hmac(key, id, timestamp, body).toString("base64")}`).join(" ")

/** Why a request's signature was not accepted (the 401's message). */
export type Unverified =
  | "missing webhook-id, webhook-timestamp or webhook-signature"
  | "webhook-timestamp is not unix seconds"
  | "webhook-timestamp is outside the tolerance (replayed, or a clock is off)"
  | "no signature matches"

/** The headers a verification reads (lower-case names, as Node gives them). */
export type SignedHeaders = Readonly<Record<string, string | undefined>>

/**
 * Checks a request's Standard Webhooks headers against `keys`: the timestamp within
 * `toleranceSeconds` of `nowSeconds`, and at least one `v1` signature equal (compared in constant
 * time) to the HMAC of the exact body bytes under one of the keys.
 */
export const verify = (
  keys: Keys,
  headers: SignedHeaders,
  body: Uint8Array,
  nowSeconds: number,
  toleranceSeconds: number = DefaultToleranceSeconds
): Either.Either<{ readonly id: string }, Unverified> => {
  const id = headers[IdHeader]
  const stamp = headers[TimestampHeader]
  const signatures = headers[SignatureHeader]
  if (id === undefined || id === "" || stamp === undefined || signatures === undefined) {
    return Either.left("missing webhook-id, webhook-timestamp or webhook-signature")
  }
  if (!/^\d{1,15}$/.test(stamp)) return Either.left("webhook-timestamp is not unix seconds")
  const timestamp = Number(stamp)
  if (Math.abs(nowSeconds - timestamp) > toleranceSeconds) {
    return Either.left("webhook-timestamp is outside the tolerance (replayed, or a clock is off)")
  }
  const offered = signatures.split(" ").flatMap((entry) => {
    const [version, encoded] = entry.split(",", 2)
    return version === "v1" && encoded !== undefined && base64.test(encoded) ? [Buffer.from(encoded, "base64")] : []
  })
  // Every key against every offered signature, without stopping at the first match: the time
  // taken says nothing about which one matched. Lengths are public (an HMAC-SHA256 is 32 bytes).
  let matched = false
  for (const key of keys.keys) {
    const expected = hmac(key, id, timestamp, body)
    for (const candidate of offered) {
      if (candidate.length === expected.length && timingSafeEqual(candidate, expected)) matched = true
    }
  }
  return matched ? Either.right({ id }) : Either.left("no signature matches")
}
