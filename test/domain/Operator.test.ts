import { describe, expect, it } from "@effect/vitest"
import { boundReason, CutMarker, MaxKeptReasonBytes } from "../../src/domain/Operator.js"

const bytes = (text: string) => Buffer.byteLength(text, "utf8")

describe("boundReason", () => {
  it("keeps a reason that fits whole", () => {
    expect(boundReason("receiver unavailable")).toBe("receiver unavailable")
    const exact = "a".repeat(MaxKeptReasonBytes)
    expect(boundReason(exact)).toBe(exact)
  })

  it("cuts a longer one at whole code points to 1 KiB, the marker included", () => {
    const cut = boundReason("a".repeat(MaxKeptReasonBytes + 1))
    expect(bytes(cut)).toBe(1024)
    expect(cut).toBe("a".repeat(1024 - bytes("…[cut]")) + "…[cut]")
    // Four-byte code points are never split (no lone surrogate, valid UTF-8).
    const emoji = boundReason("😀".repeat(400))
    expect(emoji.endsWith(CutMarker)).toBe(true)
    expect(bytes(emoji)).toBeLessThanOrEqual(1024)
    expect([...emoji.slice(0, -CutMarker.length)].every((c) => c === "😀")).toBe(true)
  })
})
