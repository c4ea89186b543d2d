/**
 * Standard Webhooks signatures without a socket: ours equal the reference library's, what it
 * signs verifies, and every way a request can be unsigned, forged, replayed or malformed is
 * refused with its reason. The expected signatures come from `standardwebhooks`, not from us.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either, Redacted } from "effect"
import { Webhook } from "standardwebhooks"
import * as WebhookSignature from "../../src/http/WebhookSignature.js"
import { OtherSecret, TestSecret } from "./signing.js"

const keysOf = (secrets: WebhookSignature.SecretsInput) => Either.getOrThrow(WebhookSignature.decodeSecrets(secrets, "test"))
const body = Buffer.from(`{"eventId":"evt-A1","flowId":"A","seq":1,"body":{"note":"héllo"}}`)
const now = 1_767_225_600

const headers = (secret: string, id = "evt-A1", at = now) => ({
  "webhook-id": id,
  "webhook-timestamp": String(at),
  "webhook-signature": new Webhook(secret).sign(id, new Date(at * 1000), body)
})

describe("WebhookSignature.sign", () => {
  it("equals the reference library's signature, one per secret in order", () => {
    const reference = (secret: string) => new Webhook(secret).sign("evt-A1", new Date(now * 1000), body)
    expect(WebhookSignature.sign(keysOf(TestSecret), "evt-A1", now, body)).toBe(reference(TestSecret))
    expect(WebhookSignature.sign(keysOf(`${TestSecret} ${OtherSecret}`), "evt-A1", now, body)).toBe(`${reference(TestSecret)} ${reference(OtherSecret)}`)
  })
})

describe("WebhookSignature.verify", () => {
  it("accepts what the reference library signs, with any of the receiver's secrets", () => {
    expect(WebhookSignature.verify(keysOf(TestSecret), headers(TestSecret), body, now)).toEqual(Either.right({ id: "evt-A1" }))
    expect(Either.isRight(WebhookSignature.verify(keysOf([OtherSecret, TestSecret]), headers(TestSecret), body, now))).toBe(true)
  })

  it("accepts a header with several signatures when one of them matches, and ignores other versions", () => {
    const signed = headers(TestSecret)
    const several = { ...signed, "webhook-signature": `v2,abc v1,${Buffer.alloc(32).toString("base64")} ${signed["webhook-signature"]}` }
    expect(Either.isRight(WebhookSignature.verify(keysOf(TestSecret), several, body, now))).toBe(true)
  })

  it("refuses a missing header", () => {
    for (const missing of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
      const partial = Object.fromEntries(Object.entries(headers(TestSecret)).filter(([name]) => name !== missing))
      expect(WebhookSignature.verify(keysOf(TestSecret), partial, body, now)).toEqual(
        Either.left("missing webhook-id, webhook-timestamp or webhook-signature")
      )
    }
  })

  it("refuses another secret, a tampered body, another id and another timestamp", () => {
    const keys = keysOf(TestSecret)
    expect(WebhookSignature.verify(keys, headers(OtherSecret), body, now)).toEqual(Either.left("no signature matches"))
    expect(WebhookSignature.verify(keys, headers(TestSecret), Buffer.from(body.toString().replace("1", "2")), now)).toEqual(
      Either.left("no signature matches")
    )
    expect(WebhookSignature.verify(keys, { ...headers(TestSecret), "webhook-id": "evt-A2" }, body, now)).toEqual(Either.left("no signature matches"))
    expect(WebhookSignature.verify(keys, { ...headers(TestSecret), "webhook-timestamp": String(now - 1) }, body, now)).toEqual(
      Either.left("no signature matches")
    )
  })

  it("takes a timestamp up to the tolerance away, either way, and refuses one further", () => {
    const keys = keysOf(TestSecret)
    for (const at of [now - 300, now + 300]) expect(Either.isRight(WebhookSignature.verify(keys, headers(TestSecret, "evt-A1", at), body, now))).toBe(true)
    for (const at of [now - 301, now + 301]) {
      expect(WebhookSignature.verify(keys, headers(TestSecret, "evt-A1", at), body, now)).toEqual(
        Either.left("webhook-timestamp is outside the tolerance (replayed, or a clock is off)")
      )
    }
    expect(Either.isRight(WebhookSignature.verify(keys, headers(TestSecret, "evt-A1", now - 301), body, now, 600))).toBe(true)
  })

  it("refuses a timestamp that is not unix seconds, and signatures that are not base64", () => {
    const keys = keysOf(TestSecret)
    for (const stamp of ["", "1.5", "-1", "soon", `${now}`.padStart(20, "9")]) {
      expect(WebhookSignature.verify(keys, { ...headers(TestSecret), "webhook-timestamp": stamp }, body, now)).toEqual(
        Either.left("webhook-timestamp is not unix seconds")
      )
    }
    for (const signature of ["", "v1", "v1,", "v1,!!!!", "garbage"]) {
      expect(WebhookSignature.verify(keys, { ...headers(TestSecret), "webhook-signature": signature }, body, now)).toEqual(
        Either.left("no signature matches")
      )
    }
  })
})

describe("WebhookSignature.decodeSecrets", () => {
  it("reads whsec_ base64 secrets, space-separated or listed, redacted or not", () => {
    expect(keysOf(TestSecret).keys).toHaveLength(1)
    expect(keysOf(` ${TestSecret}  ${OtherSecret} `).keys).toHaveLength(2)
    expect(keysOf([Redacted.make(`${TestSecret} ${OtherSecret}`), TestSecret]).keys).toHaveLength(3)
    expect(keysOf("").keys).toHaveLength(0)
  })

  it("refuses a secret without the prefix or not base64, naming its position and never its text", () => {
    for (const secrets of ["s3cret", "whsec_", "whsec_s3cret!", `${TestSecret} whsec_a`]) {
      const error = Either.getLeft(WebhookSignature.decodeSecrets(secrets, "test"))
      expect(error._tag === "Some" && error.value._tag).toBe("InvalidWebhookSecret")
      expect(error._tag === "Some" && error.value.message).not.toMatch(/s3cret|whsec_a\b/)
    }
  })

  it("keeps the keys redacted when printed", () => {
    expect(JSON.stringify(keysOf(TestSecret))).not.toContain(Buffer.alloc(32, 0x2a).toString("base64"))
    expect(String(keysOf(TestSecret).keys[0])).toBe("<redacted>")
  })
})
