import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { decideReceive } from "../../src/domain/Receiver.js"
import type { Receipt } from "../../src/domain/Receiver.js"

const delivery: Receipt = { eventId: "A2", flowId: "A", seq: 2, bodyText: '{"delta":5}' }

describe("decideReceive", () => {
  it("applies a new id at seq = last applied + 1 (Accepted path)", () => {
    expect(decideReceive(delivery, undefined, 1)).toEqual({ _tag: "Apply" })
    expect(decideReceive({ ...delivery, eventId: "A1", seq: 1 }, undefined, 0)).toEqual({ _tag: "Apply" })
  })

  it("answers Duplicate when the same id, flow, seq and body already has a receipt", () => {
    expect(decideReceive(delivery, { ...delivery }, 2)).toEqual({ _tag: "Reply", reply: { _tag: "Duplicate" } })
  })

  it("answers Duplicate for a resend even if later seqs were applied since", () => {
    expect(decideReceive(delivery, { ...delivery }, 7)).toEqual({ _tag: "Reply", reply: { _tag: "Duplicate" } })
  })

  it("answers IdConflict when the id's receipt has another flow, seq or body", () => {
    const conflict = { _tag: "Reply", reply: { _tag: "IdConflict" } }
    expect(decideReceive(delivery, { ...delivery, flowId: "B" }, 2)).toEqual(conflict)
    expect(decideReceive(delivery, { ...delivery, seq: 1 }, 2)).toEqual(conflict)
    expect(decideReceive(delivery, { ...delivery, bodyText: '{"delta":6}' }, 2)).toEqual(conflict)
    // Even when the delivery itself would be next in order, the id is taken.
    expect(decideReceive(delivery, { ...delivery, flowId: "B" }, 1)).toEqual(conflict)
  })

  it("answers SequenceConflict when the seq was already applied under another id", () => {
    const sc = { _tag: "Reply", reply: { _tag: "SequenceConflict" } }
    expect(decideReceive(delivery, undefined, 2)).toEqual(sc)
    expect(decideReceive(delivery, undefined, 5)).toEqual(sc)
  })

  it("answers Gap with the expected seq when the delivery is ahead", () => {
    expect(decideReceive({ ...delivery, seq: 3 }, undefined, 1)).toEqual({ _tag: "Reply", reply: { _tag: "Gap", expected: 2 } })
    expect(decideReceive({ ...delivery, seq: 9 }, undefined, 0)).toEqual({ _tag: "Reply", reply: { _tag: "Gap", expected: 1 } })
  })

  const receiptArb = (eventId: fc.Arbitrary<string>) =>
    fc.record({
      eventId,
      flowId: fc.constantFrom("A", "B"),
      seq: fc.integer({ min: 1, max: 6 }),
      bodyText: fc.constantFrom('{"delta":1}', '{"delta":2}')
    })

  it.prop(
    "agrees with the SPEC §3 reply table",
    [receiptArb(fc.constant("E")), fc.option(receiptArb(fc.constant("E")), { nil: undefined }), fc.integer({ min: 0, max: 6 })],
    ([d, stored, last]) => {
      const decision = decideReceive(d, stored, last)
      if (stored !== undefined) {
        const same = stored.flowId === d.flowId && stored.seq === d.seq && stored.bodyText === d.bodyText
        expect(decision).toEqual({ _tag: "Reply", reply: { _tag: same ? "Duplicate" : "IdConflict" } })
      } else if (d.seq <= last) {
        expect(decision).toEqual({ _tag: "Reply", reply: { _tag: "SequenceConflict" } })
      } else if (d.seq > last + 1) {
        expect(decision).toEqual({ _tag: "Reply", reply: { _tag: "Gap", expected: last + 1 } })
      } else {
        expect(d.seq).toBe(last + 1)
        expect(decision).toEqual({ _tag: "Apply" })
      }
    }
  )

  it.prop(
    "a receiver that applies only what decideReceive allows applies each flow in seq order, once",
    [fc.array(fc.tuple(fc.constantFrom("A", "B"), fc.integer({ min: 1, max: 4 })), { maxLength: 40 })],
    ([sends]) => {
      // Deliveries of well-formed events (id = flow + seq, one body per id) in arbitrary order,
      // with resends; the receiver state evolves as the store would.
      const receipts = new Map<string, Receipt>()
      const last = new Map<string, number>()
      const applied: Array<string> = []
      for (const [flowId, seq] of sends) {
        const r: Receipt = { eventId: `${flowId}${seq}`, flowId, seq, bodyText: `{"delta":${seq}}` }
        const decision = decideReceive(r, receipts.get(r.eventId), last.get(flowId) ?? 0)
        if (decision._tag === "Apply") {
          receipts.set(r.eventId, r)
          last.set(flowId, seq)
          applied.push(r.eventId)
        } else {
          // A well-formed resend is never a conflict.
          expect(["Duplicate", "Gap"]).toContain(decision.reply._tag)
        }
      }
      for (const flowId of ["A", "B"]) {
        const seqs = applied.filter((id) => id.startsWith(flowId)).map((id) => Number(id.slice(1)))
        expect(seqs).toEqual(seqs.map((_, i) => i + 1))
      }
      expect(new Set(applied).size).toBe(applied.length)
    }
  )
})
