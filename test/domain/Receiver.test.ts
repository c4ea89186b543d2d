import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { decideReceive } from "../../src/domain/Receiver.js"
import type { Receipt } from "../../src/domain/Receiver.js"
import { FlowId } from "../../src/domain/Ids.js"
import { previousSeqOf, resumeAfterDiscard } from "../../src/domain/Operator.js"
import type { FlowRecord } from "../../src/domain/Records.js"
import { readyEvent } from "./fixtures.js"

const delivery: Receipt = { eventId: "A2", flowId: "A", seq: 2, bodyText: '{"delta":5}' }

/** A head as the queue holds it (only its seq matters to `previousSeqOf`). */
const head = readyEvent()

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

  describe("a delivery after seqs an operator discarded (previousSeq)", () => {
    const after = { ...delivery, eventId: "A4", seq: 4 }

    it("is applied past the gap when its previousSeq is the last applied seq", () => {
      expect(decideReceive({ ...after, previousSeq: 2 }, undefined, 2)).toEqual({ _tag: "Apply" })
      // The flow's first events discarded: nothing applied yet, previousSeq 0.
      expect(decideReceive({ ...after, previousSeq: 0 }, undefined, 0)).toEqual({ _tag: "Apply" })
    })

    it("is applied when the receiver is past previousSeq (it applied an event whose reply was lost, then discarded)", () => {
      expect(decideReceive({ ...after, previousSeq: 1 }, undefined, 3)).toEqual({ _tag: "Apply" })
      expect(decideReceive({ ...after, previousSeq: 1 }, undefined, 2)).toEqual({ _tag: "Apply" })
    })

    it("is still a Gap when the receiver has not applied previousSeq, or without previousSeq", () => {
      expect(decideReceive({ ...after, previousSeq: 2 }, undefined, 1)).toEqual({ _tag: "Reply", reply: { _tag: "Gap", expected: 2 } })
      expect(decideReceive(after, undefined, 2)).toEqual({ _tag: "Reply", reply: { _tag: "Gap", expected: 3 } })
    })

    it("changes nothing of Duplicate, IdConflict, SequenceConflict and pruned receipts", () => {
      const skipping = { ...after, previousSeq: 1 }
      expect(decideReceive(skipping, { ...after }, 4)).toEqual({ _tag: "Reply", reply: { _tag: "Duplicate" } })
      expect(decideReceive(skipping, { ...after, bodyText: "{}" }, 4)).toEqual({ _tag: "Reply", reply: { _tag: "IdConflict" } })
      expect(decideReceive(skipping, undefined, 4)).toEqual({ _tag: "Reply", reply: { _tag: "SequenceConflict" } })
      expect(decideReceive(skipping, undefined, 6)).toEqual({ _tag: "Reply", reply: { _tag: "SequenceConflict" } })
      expect(decideReceive(skipping, undefined, 6, 5)).toEqual({ _tag: "Reply", reply: { _tag: "Duplicate" } })
    })

    it.prop(
      "every event of a flow not discarded is applied, in order, whichever events an operator discards",
      [fc.array(fc.boolean(), { minLength: 1, maxLength: 12 })],
      ([discardedAt]) => {
        // The queue's side, head by head: a discarded head moves the flow's resume point, the next
        // one's delivery carries what it names.
        let flow: FlowRecord = { flowId: FlowId.make("A"), seq: discardedAt.length, served: 0, headSeq: 1, eligibleAt: 0, weight: 1, burst: 0, group: null }
        let last = 0
        const applied: Array<number> = []
        discardedAt.forEach((discarded, i) => {
          const seq = i + 1
          if (discarded) {
            flow = { ...flow, resume: resumeAfterDiscard(flow.resume, seq) }
            return
          }
          const previousSeq = previousSeqOf(flow, { ...head, seq })
          const decision = decideReceive({ eventId: `A${seq}`, flowId: "A", seq, bodyText: "{}", previousSeq }, undefined, last)
          expect(decision).toEqual({ _tag: "Apply" })
          last = seq
          applied.push(seq)
        })
        expect(applied).toEqual(discardedAt.flatMap((discarded, i) => (discarded ? [] : [i + 1])))
      }
    )
  })

  const receiptArb = (eventId: fc.Arbitrary<string>) =>
    fc.record({
      eventId,
      flowId: fc.constantFrom("A", "B"),
      seq: fc.integer({ min: 1, max: 6 }),
      bodyText: fc.constantFrom('{"delta":1}', '{"delta":2}')
    })

  it.prop(
    "agrees with the table of docs/protocol.md, Receiving",
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
