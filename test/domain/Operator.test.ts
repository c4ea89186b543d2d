import { describe, expect, it } from "@effect/vitest"
import { boundReason, CutMarker, MaxKeptReasonBytes, previousSeqOf, resumeAfterDiscard } from "../../src/domain/Operator.js"
import { EventId, FlowId } from "../../src/domain/Ids.js"
import type { EventRecord, FlowRecord } from "../../src/domain/Records.js"
import { readyEvent } from "./fixtures.js"

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

describe("where a flow resumes after a discard", () => {
  it("resumes after the event before the discarded head (0 when it was the flow's first)", () => {
    expect(resumeAfterDiscard(undefined, 2)).toEqual({ seq: 3, after: 1 })
    expect(resumeAfterDiscard(undefined, 1)).toEqual({ seq: 2, after: 0 })
  })

  it("chains discards in a row: discarding n then n + 1 resumes n + 2 after n - 1", () => {
    const first = resumeAfterDiscard(undefined, 5)
    expect(resumeAfterDiscard(first, 6)).toEqual({ seq: 7, after: 4 })
    expect(resumeAfterDiscard(resumeAfterDiscard(first, 6), 7)).toEqual({ seq: 8, after: 4 })
  })

  it("starts a new run when an event was acked since the last discard", () => {
    expect(resumeAfterDiscard({ seq: 3, after: 1 }, 5)).toEqual({ seq: 6, after: 4 })
  })

  it("names previousSeq only for the event right after the run", () => {
    const flow: FlowRecord = { flowId: FlowId.make("A"), seq: 9, served: 0, headSeq: 3, eligibleAt: 0, weight: 1, burst: 0, group: null }
    const at = (seq: number): EventRecord => readyEvent({ eventId: EventId.make(`A${seq}`), seq })
    expect(previousSeqOf(flow, at(3))).toBeUndefined()
    expect(previousSeqOf({ ...flow, resume: { seq: 3, after: 1 } }, at(3))).toBe(1)
    expect(previousSeqOf({ ...flow, resume: { seq: 3, after: 1 } }, at(4))).toBeUndefined()
  })
})
