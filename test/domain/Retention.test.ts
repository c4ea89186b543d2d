/**
 * The pure side of retention: which events a prune deletes, what a re-enqueue of a pruned id
 * answers, and what a receiver answers for a seq whose receipt was pruned.
 */
import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import type { EventId, FlowId } from "../../src/domain/Ids.js"
import * as Operations from "../../src/domain/Operations.js"
import { seedPolicy } from "../../src/domain/Policy.js"
import { reenqueue, settleEvent } from "../../src/domain/Protocol.js"
import type { EventRecord } from "../../src/domain/Records.js"
import { decideReceive } from "../../src/domain/Receiver.js"

const eid = (s: string) => s as EventId
const fid = (s: string) => s as FlowId
const hash = (text: string) => `h(${text})`

describe("Operations.prune", () => {
  const candidate = (id: string, state: EventRecord["state"], ackedAt: number | null): Operations.PruneCandidate => ({
    eventId: eid(id), flowId: fid("A"), seq: 1, state, ackedAt, bodyText: `{"id":"${id}"}`
  })

  it("deletes only acked events acked at or before the cutoff, each leaving a dedup record", () => {
    const decided = Operations.prune([
      candidate("old", "acked", 10),
      candidate("edge", "acked", 20),
      candidate("young", "acked", 21),
      candidate("never-stamped", "acked", null),
      ...(["ready", "inflight", "quarantined"] as const).map((state) => candidate(state, state, 0))
    ], 20, 500, hash)
    expect(decided.deleted).toEqual(["old", "edge"])
    expect(decided.dedup).toEqual([
      { eventId: "old", flowId: "A", seq: 1, bodyHash: 'h({"id":"old"})', prunedAt: 500 },
      { eventId: "edge", flowId: "A", seq: 1, bodyHash: 'h({"id":"edge"})', prunedAt: 500 }
    ])
  })
})

describe("reenqueue of a pruned id", () => {
  const pruned = { flowId: fid("A"), seq: 3, bodyText: null, bodyHash: hash('{"delta":1}') }

  it("is Existing with the same flow and body (compared by hash)", () => {
    expect(reenqueue(pruned, eid("A3"), fid("A"), '{"delta":1}', hash)).toEqual(Either.right({ _tag: "Existing", seq: 3 }))
  })

  it("is a conflict with another body or flow", () => {
    for (const [flow, text] of [["A", '{"delta":2}'], ["B", '{"delta":1}']] as const) {
      const result = reenqueue(pruned, eid("A3"), fid(flow), text, hash)
      expect(Either.isLeft(result) && result.left).toMatchObject({ _tag: "EnqueueConflict", storedFlowId: "A", storedSeq: 3 })
    }
  })
})

describe("the ack time", () => {
  it("an ack decision carries the settle's now; no other decision does", () => {
    const e: EventRecord = {
      eventId: eid("A1"), flowId: fid("A"), seq: 1, body: {}, state: "inflight", nextAt: 0, leaseUntil: 5,
      generation: 1, attempts: 1, lifetimeAttempts: 1, reason: null
    }
    const token = { eventId: e.eventId, generation: 1 }
    expect(settleEvent(e, token, { _tag: "Accepted" }, 3, seedPolicy).ackedAt).toBe(3)
    expect(settleEvent(e, token, { _tag: "IdConflict" }, 3, seedPolicy).ackedAt).toBeUndefined()
    const settled = Operations.settle([[token, { _tag: "Duplicate" }]], new Map([["A1", e]]), 4, seedPolicy, [])
    expect(settled.acked).toEqual([{ eventId: "A1", ackedAt: 4 }])
  })
})

describe("decideReceive after receipts were pruned", () => {
  const delivery = { eventId: "A2", flowId: "A", seq: 2, bodyText: "{}" }

  it("a seq at or below the pruned mark without a receipt is Duplicate", () => {
    expect(decideReceive(delivery, undefined, 5, 2)).toEqual({ _tag: "Reply", reply: { _tag: "Duplicate" } })
  })

  it("above the mark the usual rules hold", () => {
    expect(decideReceive(delivery, undefined, 5, 1)).toEqual({ _tag: "Reply", reply: { _tag: "SequenceConflict" } })
    expect(decideReceive({ ...delivery, seq: 6 }, undefined, 5, 2)).toEqual({ _tag: "Apply" })
  })
})
