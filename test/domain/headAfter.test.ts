/**
 * `Operations.headAfter` and `settleChanges`: the flow row's cached head after its head event
 * changed. docs/protocol.md, Claims: the head is the flow's lowest non-acked seq; it is eligible at
 * `next_at` when ready and at `lease_until` when in flight; a quarantined head is never eligible
 * and blocks its flow (its later events are never considered). These are the values the claim's
 * index reads.
 */
import { describe, expect, it } from "@effect/vitest"
import { headAfter, settleChanges, successorKey } from "../../src/domain/Operations.js"
import type { DeliveryReply } from "../../src/domain/Outcomes.js"
import { seedPolicy } from "../../src/domain/Policy.js"
import { settleEvent } from "../../src/domain/Protocol.js"
import { eid, fid, readyEvent } from "./fixtures.js"

const a1 = readyEvent({ eventId: eid("A1"), flowId: fid("A"), seq: 1, nextAt: 0 })
const a2 = readyEvent({ eventId: eid("A2"), flowId: fid("A"), seq: 2, nextAt: 3 })
const inflight = { ...a1, state: "inflight" as const, generation: 1, attempts: 1, lifetimeAttempts: 1, leaseUntil: 5 }

describe("headAfter", () => {
  it("a ready head stays the head, eligible at its nextAt, whatever follows it", () => {
    const retried = { ...inflight, state: "ready" as const, leaseUntil: null, nextAt: 7 }
    expect(headAfter(retried, a2)).toEqual({ flowId: "A", headSeq: 1, eligibleAt: 7 })
    expect(headAfter(retried, undefined)).toEqual({ flowId: "A", headSeq: 1, eligibleAt: 7 })
  })

  it("an in-flight head stays the head, eligible again when its lease ends", () => {
    expect(headAfter(inflight, a2)).toEqual({ flowId: "A", headSeq: 1, eligibleAt: 5 })
  })

  it("a quarantined head stays the head and is never eligible: the next event does not become the head", () => {
    const quarantined = { ...inflight, state: "quarantined" as const, leaseUntil: null, reason: "id_conflict" }
    expect(headAfter(quarantined, a2)).toEqual({ flowId: "A", headSeq: 1, eligibleAt: null })
    expect(headAfter(quarantined, undefined)).toEqual({ flowId: "A", headSeq: 1, eligibleAt: null })
  })

  it("an acked head hands the head to the next event, eligible when that one is", () => {
    const acked = { ...inflight, state: "acked" as const, leaseUntil: null }
    expect(headAfter(acked, a2)).toEqual({ flowId: "A", headSeq: 2, eligibleAt: 3 })
  })

  it("an acked head with no next event leaves the flow without a head", () => {
    const acked = { ...inflight, state: "acked" as const, leaseUntil: null }
    expect(headAfter(acked, undefined)).toEqual({ flowId: "A", headSeq: null, eligibleAt: null })
  })
})

describe("settleChanges", () => {
  const settled = (reply: DeliveryReply) => {
    const decision = settleEvent(inflight, { eventId: inflight.eventId, generation: 1 }, reply, 2, seedPolicy)
    expect(decision.next).toBeDefined()
    const successors = new Map([[successorKey(inflight), a2]])
    return settleChanges([decision.next!], successors, { tick: 2, ticket: 1 })
  }

  it("a permanent refusal quarantines the head in place: the flow's head stays seq 1 and is not eligible", () => {
    const changes = settled({ _tag: "Rejected", code: "unsupported_delta" })
    expect(changes.events.map((e) => [e.eventId, e.state])).toEqual([["A1", "quarantined"]])
    expect(changes.heads).toEqual([{ flowId: "A", headSeq: 1, eligibleAt: null }])
  })

  it("an ack moves the flow's head to its next event", () => {
    const changes = settled({ _tag: "Accepted" })
    expect(changes.heads).toEqual([{ flowId: "A", headSeq: 2, eligibleAt: 3 }])
  })

  it("a retry keeps the head where it is, eligible when its backoff ends", () => {
    // Seed policy: the first retry backs off base · 2^0 = 2 ticks from now = 2.
    const changes = settled({ _tag: "Retry", reason: "unavailable" })
    expect(changes.heads).toEqual([{ flowId: "A", headSeq: 1, eligibleAt: 4 }])
  })
})
