import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Either, Schema, FastCheck as fc } from "effect"
import { canonicalize } from "../../src/domain/Json.js"
import { DeliveryReply, SettleOutcome } from "../../src/domain/Outcomes.js"
import { seedPolicy } from "../../src/domain/Policy.js"
import type { RelayPolicy } from "../../src/domain/Policy.js"
import {
  advanceClock,
  claimEvent,
  eligibleAt,
  isEligible,
  redriveEvent,
  reenqueue,
  settleEvent
} from "../../src/domain/Protocol.js"
import type { StoredIdentity } from "../../src/domain/Protocol.js"
import { boundReason, CutMarker, MaxKeptReasonBytes as MaxStoredReasonBytes } from "../../src/domain/Operator.js"
import { EventRecord } from "../../src/domain/Records.js"
import type { Token } from "../../src/domain/Records.js"
import { eid, fid, leftOf, readyEvent, rightOf, snapshotOf } from "./fixtures.js"

const tick = fc.integer({ min: 0, max: 1_000_000 })
const replyArb = Arbitrary.make(DeliveryReply)
const eventArb = Arbitrary.make(EventRecord)

/**
 * docs/protocol.md, Claims: a head is eligible when ready with next_at <= now, or inflight with
 * lease_until <= now.
 */
const specEligible = (e: EventRecord, now: number): boolean =>
  (e.state === "ready" && e.nextAt <= now) || (e.state === "inflight" && e.leaseUntil !== null && e.leaseUntil <= now)

/** A claimed head: inflight at generation 1 with one attempt spent, lease until `at + lease`. */
const claimedAt = (at: number, overrides: Partial<EventRecord> = {}, policy: RelayPolicy = seedPolicy) =>
  claimEvent(readyEvent({ nextAt: at, ...overrides }), at, policy)

const tokenOf = (e: EventRecord): Token => ({ eventId: e.eventId, generation: e.generation })

describe("advanceClock", () => {
  it("refuses a clock below the persisted tick with ClockRegressed", () => {
    const error = leftOf(advanceClock({ tick: 10, ticket: 4 }, 9))
    expect(error._tag).toBe("ClockRegressed")
    expect(error.now).toBe(9)
    expect(error.tick).toBe(10)
  })

  it("accepts the same tick and a later one", () => {
    expect(rightOf(advanceClock({ tick: 10, ticket: 4 }, 10))).toEqual({ clock: { tick: 10, ticket: 4 }, regressed: false })
    expect(rightOf(advanceClock({ tick: 10, ticket: 4 }, 12))).toEqual({ clock: { tick: 12, ticket: 4 }, regressed: false })
  })

  it("in clamp mode accepts a clock that is behind, keeps the persisted tick and says so", () => {
    expect(rightOf(advanceClock({ tick: 10, ticket: 4 }, 9, "clamp"))).toEqual({ clock: { tick: 10, ticket: 4 }, regressed: true })
    expect(rightOf(advanceClock({ tick: 10, ticket: 4 }, 11, "clamp"))).toEqual({ clock: { tick: 11, ticket: 4 }, regressed: false })
  })

  it.prop("stores max(tick, now) or refuses now < tick, never touching the ticket", [tick, tick, fc.nat()], ([t, now, ticket]) => {
    const clock = { tick: t, ticket }
    const before = snapshotOf(clock)
    const result = advanceClock(clock, now)
    if (now < t) {
      const error = leftOf(result)
      expect(error._tag).toBe("ClockRegressed")
      expect({ now: error.now, tick: error.tick }).toEqual({ now, tick: t })
    } else {
      expect(rightOf(result)).toEqual({ clock: { tick: Math.max(t, now), ticket }, regressed: false })
    }
    expect(clock).toEqual(before)
  })
})

describe("eligibility", () => {
  it("a ready head is eligible from its next_at on", () => {
    const head = readyEvent({ nextAt: 4 })
    expect(eligibleAt(head)).toBe(4)
    expect(isEligible(head, 3)).toBe(false)
    expect(isEligible(head, 4)).toBe(true)
    expect(isEligible(head, 100)).toBe(true)
  })

  it("an inflight head is eligible only once its lease has expired", () => {
    const head = claimedAt(0)
    expect(head.leaseUntil).toBe(5)
    expect(eligibleAt(head)).toBe(5)
    expect(isEligible(head, 0)).toBe(false)
    expect(isEligible(head, 4)).toBe(false)
    expect(isEligible(head, 5)).toBe(true)
  })

  it("a quarantined head is never eligible", () => {
    const head = readyEvent({ state: "quarantined", reason: "id_conflict", nextAt: 0, generation: 1 })
    expect(eligibleAt(head)).toBeNull()
    for (const now of [0, 1, 1_000_000, Number.MAX_SAFE_INTEGER]) expect(isEligible(head, now)).toBe(false)
  })

  it("an acked head is never eligible", () => {
    const head = readyEvent({ state: "acked", nextAt: 0, generation: 1, attempts: 1, lifetimeAttempts: 1 })
    expect(eligibleAt(head)).toBeNull()
    for (const now of [0, 1, 1_000_000, Number.MAX_SAFE_INTEGER]) expect(isEligible(head, now)).toBe(false)
  })

  it.prop("quarantined and acked heads are never eligible, whatever their times", [eventArb, tick], ([e, now]) => {
    for (const state of ["quarantined", "acked"] as const) {
      expect(eligibleAt({ ...e, state })).toBeNull()
      expect(isEligible({ ...e, state }, now)).toBe(false)
    }
  })

  it.prop("isEligible agrees with docs/protocol.md (Claims) at every head and time", [eventArb, tick], ([e, now]) => {
    expect(isEligible(e, now)).toBe(specEligible(e, now))
  })
})

describe("claimEvent", () => {
  it("makes the head inflight under a new generation with one more attempt and a lease", () => {
    const head = readyEvent({ nextAt: 3, generation: 2, attempts: 1, lifetimeAttempts: 4 })
    const before = snapshotOf(head)
    const claimed = claimEvent(head, 7, seedPolicy)
    expect(claimed).toEqual({
      ...head,
      state: "inflight",
      generation: 3,
      attempts: 2,
      lifetimeAttempts: 5,
      leaseUntil: 12
    })
    expect(head).toEqual(before)
  })

  it("re-claiming an expired lease issues a newer generation", () => {
    // Scenario 5 of docs/protocol.md: claimed at 0 (generation 1), re-claimed at 5 (generation 2).
    const first = claimedAt(0)
    expect(first.generation).toBe(1)
    expect(isEligible(first, 5)).toBe(true)
    const second = claimEvent(first, 5, seedPolicy)
    expect(second.generation).toBe(2)
    expect(second.leaseUntil).toBe(10)
    expect(second.attempts).toBe(2)
    expect(second.lifetimeAttempts).toBe(2)
  })

  it.prop(
    "generation+1, attempts+1, lifetimeAttempts+1, leaseUntil = now + lease, inflight; the rest kept",
    [eventArb, tick, fc.integer({ min: 1, max: 10_000 })],
    ([e, now, leaseTicks]) => {
      const policy = { ...seedPolicy, leaseTicks }
      const c = claimEvent(e, now, policy)
      expect(c.state).toBe("inflight")
      expect(c.generation).toBe(e.generation + 1)
      expect(c.attempts).toBe(e.attempts + 1)
      expect(c.lifetimeAttempts).toBe(e.lifetimeAttempts + 1)
      expect(c.leaseUntil).toBe(now + leaseTicks)
      expect(c.eventId).toBe(e.eventId)
      expect(c.flowId).toBe(e.flowId)
      expect(c.seq).toBe(e.seq)
      expect(c.body).toBe(e.body)
    }
  )
})

describe("settleEvent", () => {
  describe("Stale and Expired change nothing", () => {
    it("an unknown event is Stale", () => {
      const d = settleEvent(undefined, { eventId: eid("A1"), generation: 1 }, { _tag: "Accepted" }, 0, seedPolicy)
      expect(d.outcome).toEqual({ _tag: "Stale" })
      expect(d.next).toBeUndefined()
    })

    it("a token of another generation is Stale", () => {
      const e = claimedAt(0)
      for (const generation of [0, 2, 7]) {
        const d = settleEvent(e, { eventId: e.eventId, generation }, { _tag: "Accepted" }, 1, seedPolicy)
        expect(d.outcome).toEqual({ _tag: "Stale" })
        expect(d.next).toBeUndefined()
      }
    })

    it("an event that is no longer inflight is Stale, even with its current generation", () => {
      const inflight = claimedAt(0)
      for (const state of ["ready", "acked", "quarantined"] as const) {
        const e = { ...inflight, state }
        const d = settleEvent(e, tokenOf(e), { _tag: "Accepted" }, 1, seedPolicy)
        expect(d.outcome).toEqual({ _tag: "Stale" })
        expect(d.next).toBeUndefined()
      }
    })

    it("expired_lease: a settle at or after lease_until is Expired", () => {
      // Scenario 6 of docs/protocol.md: claimed at 0, settled by the same worker at 5.
      const e = claimedAt(0)
      for (const now of [5, 6, 100]) {
        const d = settleEvent(e, tokenOf(e), { _tag: "Accepted" }, now, seedPolicy)
        expect(d.outcome).toEqual({ _tag: "Expired" })
        expect(d.next).toBeUndefined()
      }
      expect(settleEvent(e, tokenOf(e), { _tag: "Accepted" }, 4, seedPolicy).outcome).toEqual({ _tag: "Acked" })
    })

    it("stale_after_reclaim: the old worker's settle is Stale, the new worker's counts", () => {
      // Scenario 5 of docs/protocol.md.
      const first = claimedAt(0)
      const oldToken = tokenOf(first)
      const second = claimEvent(first, 5, seedPolicy)
      const old = settleEvent(second, oldToken, { _tag: "Accepted" }, 6, seedPolicy)
      expect(old.outcome).toEqual({ _tag: "Stale" })
      expect(old.next).toBeUndefined()
      const current = settleEvent(second, tokenOf(second), { _tag: "Duplicate" }, 6, seedPolicy)
      expect(current.outcome).toEqual({ _tag: "Acked" })
      expect(current.next?.state).toBe("acked")
    })

    it.prop(
      "any reply with a token of another generation is Stale",
      [eventArb, replyArb, fc.integer({ min: 1, max: 5 }), tick],
      ([e, reply, delta, now]) => {
        const d = settleEvent(e, { eventId: e.eventId, generation: e.generation + delta }, reply, now, seedPolicy)
        expect(d).toEqual({ outcome: { _tag: "Stale" }, next: undefined })
      }
    )

    it.prop(
      "any reply after the lease ran out is Expired",
      [replyArb, tick, fc.integer({ min: 0, max: 1_000 })],
      ([reply, claimTick, late]) => {
        const e = claimedAt(claimTick)
        const before = snapshotOf(e)
        const d = settleEvent(e, tokenOf(e), reply, e.leaseUntil! + late, seedPolicy)
        expect(d).toEqual({ outcome: { _tag: "Expired" }, next: undefined })
        expect(e).toEqual(before)
      }
    )
  })

  describe("replies within the lease", () => {
    const within = (reply: DeliveryReply, overrides: Partial<EventRecord> = {}, policy: RelayPolicy = seedPolicy) => {
      const e = claimedAt(10, overrides, policy)
      return { e, d: settleEvent(e, tokenOf(e), reply, 12, policy) }
    }

    it("Accepted and Duplicate ack the event", () => {
      for (const reply of [{ _tag: "Accepted" }, { _tag: "Duplicate" }] as const) {
        const { e, d } = within(reply)
        expect(d.outcome).toEqual({ _tag: "Acked" })
        expect(d.next?.state).toBe("acked")
        expect(d.next?.generation).toBe(e.generation)
        expect(d.next?.body).toEqual(e.body)
      }
    })

    it("IdConflict quarantines with reason id_conflict", () => {
      const { d } = within({ _tag: "IdConflict" })
      expect(d.outcome).toEqual({ _tag: "Quarantined", reason: "id_conflict" })
      expect(d.next?.state).toBe("quarantined")
      expect(d.next?.reason).toBe("id_conflict")
    })

    it("SequenceConflict quarantines with reason sequence_conflict", () => {
      const { d } = within({ _tag: "SequenceConflict" })
      expect(d.outcome).toEqual({ _tag: "Quarantined", reason: "sequence_conflict" })
      expect(d.next?.state).toBe("quarantined")
      expect(d.next?.reason).toBe("sequence_conflict")
    })

    it("Rejected{code} quarantines with the code as reason", () => {
      const { d } = within({ _tag: "Rejected", code: "unsupported_delta" })
      expect(d.outcome).toEqual({ _tag: "Quarantined", reason: "unsupported_delta" })
      expect(d.next?.state).toBe("quarantined")
      expect(d.next?.reason).toBe("unsupported_delta")
    })

    it("Retry with budget left schedules the next try after the backoff, ready", () => {
      const { e, d } = within({ _tag: "Retry", reason: "unavailable" })
      // attempts = 1: now 12 + min(8, 2 · 2^0) = 14
      expect(d.outcome).toEqual({ _tag: "RetryScheduled", nextAt: 14 })
      expect(d.next?.state).toBe("ready")
      expect(d.next?.nextAt).toBe(14)
      expect(d.next?.generation).toBe(e.generation)
      expect(d.next?.attempts).toBe(1)
      expect(isEligible(d.next!, 13)).toBe(false)
      expect(isEligible(d.next!, 14)).toBe(true)
    })

    it("Gap is transient: retried while budget is left", () => {
      const { d } = within({ _tag: "Gap", expected: 1 }, { seq: 2 })
      expect(d.outcome).toEqual({ _tag: "RetryScheduled", nextAt: 14 })
      expect(d.next?.state).toBe("ready")
    })

    it("a Retry asking for more than the backoff waits that long", () => {
      // attempts = 1: the backoff is 2; the receiver asks for 5 → now 12 + 5
      const { d } = within({ _tag: "Retry", reason: "http 429", retryAfter: 5 })
      expect(d.outcome).toEqual({ _tag: "RetryScheduled", nextAt: 17 })
      expect(d.next?.nextAt).toBe(17)
    })

    it("a Retry asking for less than the backoff waits the backoff", () => {
      const { d } = within({ _tag: "Retry", reason: "http 503", retryAfter: 1 })
      expect(d.outcome).toEqual({ _tag: "RetryScheduled", nextAt: 14 })
    })

    it("a Retry asking for more than the policy's cap waits the cap", () => {
      // cap 8: a receiver cannot park its flow beyond the policy's longest backoff.
      const { d } = within({ _tag: "Retry", reason: "http 429", retryAfter: 1_000_000 })
      expect(d.outcome).toEqual({ _tag: "RetryScheduled", nextAt: 20 })
    })

    it("a Retry with a least delay still quarantines once the budget is spent", () => {
      const { d } = within({ _tag: "Retry", reason: "http 429", retryAfter: 5 }, { attempts: 2 })
      expect(d.outcome).toEqual({ _tag: "Quarantined", reason: "http 429" })
    })

    it("a refusal code longer than the bound is stored cut, with the marker", () => {
      const code = "x".repeat(5 * 1024 * 1024)
      const { d } = within({ _tag: "Rejected", code })
      const reason = (d.outcome as { readonly reason: string }).reason
      expect(reason.endsWith(CutMarker)).toBe(true)
      expect(Buffer.byteLength(reason, "utf8")).toBeLessThanOrEqual(MaxStoredReasonBytes)
      expect(d.next?.reason).toBe(reason)
      expect(code.startsWith(reason.slice(0, -CutMarker.length))).toBe(true)
    })

    it("a Retry reason longer than the bound is stored cut when the budget quarantines", () => {
      const { d } = within({ _tag: "Retry", reason: "é".repeat(4000) }, { attempts: 2 })
      expect(d.outcome._tag).toBe("Quarantined")
      expect(Buffer.byteLength(d.next!.reason!, "utf8")).toBeLessThanOrEqual(MaxStoredReasonBytes)
      expect(d.next!.reason!.endsWith(CutMarker)).toBe(true)
    })

    it("Retry or Gap when attempts == budget quarantines", () => {
      for (const reply of [{ _tag: "Retry", reason: "unavailable" }, { _tag: "Gap", expected: 1 }] as const) {
        const { d } = within(reply, { attempts: 2 }) // claimed → attempts 3 = budget
        expect(d.outcome._tag).toBe("Quarantined")
        expect(d.next?.state).toBe("quarantined")
        expect(d.next?.attempts).toBe(3)
      }
    })

    it.prop(
      "a Retry with budget left sets nextAt = now + min(cap, base * 2^(attempts-1))",
      [
        fc.integer({ min: 1, max: 30 }),
        fc.integer({ min: 0, max: 1_000 }),
        fc.integer({ min: 0, max: 100_000 }),
        fc.integer({ min: 1, max: 1_000 }),
        tick
      ],
      ([retryBudget, backoffBase, backoffCap, leaseTicks, claimTick]) => {
        const policy = { ...seedPolicy, retryBudget, backoffBase, backoffCap, leaseTicks }
        for (let spent = 0; spent < retryBudget; spent++) {
          const e = claimEvent(readyEvent({ attempts: spent }), claimTick, policy)
          const now = claimTick + leaseTicks - 1
          const d = settleEvent(e, tokenOf(e), { _tag: "Retry", reason: "unavailable" }, now, policy)
          const attempts = spent + 1
          if (attempts < retryBudget) {
            const nextAt = now + Math.min(backoffCap, backoffBase * 2 ** (attempts - 1))
            expect(d.outcome).toEqual({ _tag: "RetryScheduled", nextAt })
            expect(d.next?.state).toBe("ready")
            expect(d.next?.nextAt).toBe(nextAt)
          } else {
            expect(d.outcome._tag).toBe("Quarantined")
            expect(d.next?.state).toBe("quarantined")
          }
        }
      }
    )

    it.prop(
      "every reply maps to the outcome of docs/protocol.md's table (Replies)",
      [replyArb, fc.integer({ min: 0, max: 5 }), tick],
      ([reply, spent, claimTick]) => {
        const e = claimEvent(readyEvent({ attempts: spent }), claimTick, seedPolicy)
        const now = claimTick + 1
        const d = settleEvent(e, tokenOf(e), reply, now, seedPolicy)
        expect(Schema.is(SettleOutcome)(d.outcome)).toBe(true)
        switch (reply._tag) {
          case "Accepted":
          case "Duplicate":
            expect(d.outcome).toEqual({ _tag: "Acked" })
            expect(d.next?.state).toBe("acked")
            break
          case "IdConflict":
            expect(d.outcome).toEqual({ _tag: "Quarantined", reason: "id_conflict" })
            break
          case "SequenceConflict":
            expect(d.outcome).toEqual({ _tag: "Quarantined", reason: "sequence_conflict" })
            break
          case "Rejected":
            expect(d.outcome).toEqual({ _tag: "Quarantined", reason: boundReason(reply.code) })
            break
          case "Retry":
          case "Gap":
            if (e.attempts < seedPolicy.retryBudget) {
              // The schedule, or the receiver's least delay when it asks for more, never beyond the cap 8.
              const schedule = Math.min(8, 2 * 2 ** (e.attempts - 1))
              const least = reply._tag === "Retry" ? reply.retryAfter ?? 0 : 0
              expect(d.outcome).toEqual({ _tag: "RetryScheduled", nextAt: now + Math.min(8, Math.max(schedule, least)) })
              expect(d.next?.state).toBe("ready")
            } else {
              expect(d.outcome._tag).toBe("Quarantined")
              expect(d.next?.state).toBe("quarantined")
            }
            break
        }
        // Settling never re-ids, re-sequences or edits the event, and never bumps the generation.
        expect(d.next?.eventId).toBe(e.eventId)
        expect(d.next?.flowId).toBe(e.flowId)
        expect(d.next?.seq).toBe(e.seq)
        expect(d.next?.body).toBe(e.body)
        expect(d.next?.generation).toBe(e.generation)
        expect(d.next?.lifetimeAttempts).toBe(e.lifetimeAttempts)
      }
    )
  })

  it("retry_backoff: nextAt 2, then 6, then Quarantined, with B1 dispatched at tick 0", () => {
    // Scenario 4 of docs/protocol.md, replayed purely on A1's record (the turn order is the
    // claim's, tested with the stores): when A1 is eligible, and what each transient failure does
    // to it.
    const policy = seedPolicy
    const retry = { _tag: "Retry", reason: "unavailable" } as const
    let a1 = readyEvent({ body: { delta: 1 } })
    const b1 = readyEvent({ eventId: eid("B1"), flowId: fid("B"), body: { delta: 1 } })

    // tick 0: A1 is claimed and fails transiently.
    expect(isEligible(a1, 0)).toBe(true)
    a1 = claimEvent(a1, 0, policy)
    let d = settleEvent(a1, tokenOf(a1), retry, 0, policy)
    expect(d.outcome).toEqual({ _tag: "RetryScheduled", nextAt: 2 })
    a1 = d.next!

    // tick 0: B1 is dispatched as well.
    expect(isEligible(b1, 0)).toBe(true)
    const claimedB1 = claimEvent(b1, 0, policy)
    expect(settleEvent(claimedB1, tokenOf(claimedB1), { _tag: "Accepted" }, 0, policy).outcome).toEqual({ _tag: "Acked" })

    // tick 1: A1 is not taken.
    expect(isEligible(a1, 1)).toBe(false)

    // tick 2: second failure → nextAt 6.
    expect(isEligible(a1, 2)).toBe(true)
    a1 = claimEvent(a1, 2, policy)
    expect(a1.attempts).toBe(2)
    d = settleEvent(a1, tokenOf(a1), retry, 2, policy)
    expect(d.outcome).toEqual({ _tag: "RetryScheduled", nextAt: 6 })
    a1 = d.next!

    // tick 5: still not taken.
    expect(isEligible(a1, 5)).toBe(false)

    // tick 6: third failure → Quarantined (budget 3 spent); cap 8 never reached.
    expect(isEligible(a1, 6)).toBe(true)
    a1 = claimEvent(a1, 6, policy)
    expect(a1.attempts).toBe(3)
    d = settleEvent(a1, tokenOf(a1), retry, 6, policy)
    expect(d.outcome._tag).toBe("Quarantined")
    a1 = d.next!
    expect(a1.state).toBe("quarantined")
    expect(a1.generation).toBe(3)
    expect(a1.lifetimeAttempts).toBe(3)
    expect(isEligible(a1, 1_000)).toBe(false)
  })
})

describe("redriveEvent", () => {
  const quarantined = readyEvent({
    state: "quarantined",
    reason: "unsupported_delta",
    body: { delta: 10 },
    generation: 1,
    attempts: 1,
    lifetimeAttempts: 1,
    nextAt: 0
  })
  const request = { eventId: quarantined.eventId, expectedGeneration: 1, reason: "receiver limit raised" }

  it("requires a non-blank reason (MissingReason)", () => {
    for (const reason of ["", " ", "   ", "\t", "\n \t", "\u00a0", "\u3000"]) {
      const error = leftOf(redriveEvent(quarantined, { ...request, reason }, 3))
      expect(error._tag, JSON.stringify(reason)).toBe("MissingReason")
      expect(error.eventId).toBe("A1")
    }
  })

  it("fails with EventNotFound for an unknown id", () => {
    const error = leftOf(redriveEvent(undefined, { ...request, eventId: eid("nope") }, 3))
    expect(error._tag).toBe("EventNotFound")
    expect(error).toMatchObject({ eventId: "nope" })
  })

  it("fails with NotQuarantined for an event in any other state", () => {
    for (const state of ["ready", "inflight", "acked"] as const) {
      const error = leftOf(redriveEvent({ ...quarantined, state, reason: null }, request, 3))
      expect(error._tag).toBe("NotQuarantined")
      expect(error).toMatchObject({ eventId: "A1", state })
    }
  })

  it("fails with GenerationMismatch when someone acted first", () => {
    for (const expectedGeneration of [0, 2, 9]) {
      const error = leftOf(redriveEvent(quarantined, { ...request, expectedGeneration }, 3))
      expect(error._tag).toBe("GenerationMismatch")
      expect(error).toMatchObject({ eventId: "A1", expected: expectedGeneration, actual: 1 })
    }
  })

  it("releases the head: ready now, generation+1, attempts 0, reason cleared; id, flow, seq, body, lifetime kept", () => {
    const before = snapshotOf(quarantined)
    const next = rightOf(redriveEvent(quarantined, request, 3))
    expect(next.state).toBe("ready")
    expect(next.generation).toBe(2)
    expect(next.attempts).toBe(0)
    expect(next.reason).toBeNull()
    expect(next.nextAt).toBe(3)
    expect(next.lifetimeAttempts).toBe(1)
    expect(next.eventId).toBe("A1")
    expect(next.flowId).toBe("A")
    expect(next.seq).toBe(1)
    expect(next.body).toEqual({ delta: 10 })
    expect(isEligible(next, 3)).toBe(true)
    expect(quarantined).toEqual(before)
  })

  it("redrive_after_fix: a rejected head, redriven, is claimed again with lifetime attempts 2", () => {
    // Scenario 8 of docs/protocol.md (queue side).
    let a1 = claimEvent(readyEvent({ body: { delta: 10 } }), 0, seedPolicy)
    const d = settleEvent(a1, tokenOf(a1), { _tag: "Rejected", code: "unsupported_delta" }, 0, seedPolicy)
    expect(d.outcome).toEqual({ _tag: "Quarantined", reason: "unsupported_delta" })
    a1 = d.next!
    a1 = rightOf(redriveEvent(a1, { eventId: a1.eventId, expectedGeneration: a1.generation, reason: "receiver limit raised" }, 1))
    a1 = claimEvent(a1, 1, seedPolicy)
    expect(a1.lifetimeAttempts).toBe(2)
    expect(a1.attempts).toBe(1)
    expect(settleEvent(a1, tokenOf(a1), { _tag: "Accepted" }, 1, seedPolicy).outcome).toEqual({ _tag: "Acked" })
  })

  it("a redriven head gets a full new retry budget", () => {
    let e = claimedAt(0, { attempts: 2 })
    e = settleEvent(e, tokenOf(e), { _tag: "Retry", reason: "unavailable" }, 1, seedPolicy).next!
    expect(e.state).toBe("quarantined")
    e = rightOf(redriveEvent(e, { eventId: e.eventId, expectedGeneration: e.generation, reason: "fixed" }, 2))
    e = claimEvent(e, 2, seedPolicy)
    expect(settleEvent(e, tokenOf(e), { _tag: "Retry", reason: "unavailable" }, 2, seedPolicy).outcome).toEqual({
      _tag: "RetryScheduled",
      nextAt: 4
    })
  })

  it.prop(
    "succeeds exactly for a quarantined event, its generation and a non-blank reason",
    [eventArb, fc.integer({ min: 0, max: 3 }), fc.constantFrom("fixed", " ", "", "receiver limit raised"), tick],
    ([e, genDelta, reason, now]) => {
      const result = redriveEvent(e, { eventId: e.eventId, expectedGeneration: e.generation + genDelta, reason }, now)
      const ok = e.state === "quarantined" && genDelta === 0 && reason.trim() !== ""
      expect(Either.isRight(result)).toBe(ok)
      if (Either.isRight(result)) {
        expect(result.right).toEqual({
          ...e,
          state: "ready",
          generation: e.generation + 1,
          attempts: 0,
          reason: null,
          nextAt: now,
          leaseUntil: null
        })
      }
    }
  )
})

describe("reenqueue", () => {
  const stored: StoredIdentity = { flowId: fid("A"), seq: 3, bodyText: '{"delta":10}' }

  it("the same flow and body is Existing at the stored seq", () => {
    expect(rightOf(reenqueue(stored, eid("A3"), fid("A"), '{"delta":10}'))).toEqual({ _tag: "Existing", seq: 3 })
  })

  it("the same body with keys in another order is the same event", () => {
    const text = rightOf(canonicalize({ b: 2, a: 1 })).text
    const again = rightOf(canonicalize({ a: 1, b: 2 })).text
    expect(rightOf(reenqueue({ ...stored, bodyText: text }, eid("A3"), fid("A"), again))).toEqual({ _tag: "Existing", seq: 3 })
  })

  it("another body is an EnqueueConflict naming the stored flow and seq", () => {
    const error = leftOf(reenqueue(stored, eid("A3"), fid("A"), '{"delta":11}'))
    expect(error._tag).toBe("EnqueueConflict")
    expect(error).toMatchObject({ eventId: "A3", storedFlowId: "A", storedSeq: 3 })
  })

  it("another flow is an EnqueueConflict, even with the same body", () => {
    const error = leftOf(reenqueue(stored, eid("A3"), fid("B"), '{"delta":10}'))
    expect(error._tag).toBe("EnqueueConflict")
    expect(error).toMatchObject({ eventId: "A3", storedFlowId: "A", storedSeq: 3 })
  })

  it.prop(
    "is Existing exactly when both flow and canonical body match",
    [fc.constantFrom("A", "B"), fc.constantFrom("A", "B"), fc.jsonValue(), fc.jsonValue(), fc.integer({ min: 1, max: 100 })],
    ([storedFlow, flow, storedBody, body, seq]) => {
      const storedText = rightOf(canonicalize(storedBody)).text
      const text = rightOf(canonicalize(body)).text
      const result = reenqueue({ flowId: fid(storedFlow), seq, bodyText: storedText }, eid("X"), fid(flow), text)
      if (storedFlow === flow && storedText === text) expect(rightOf(result)).toEqual({ _tag: "Existing", seq })
      else expect(leftOf(result)).toMatchObject({ _tag: "EnqueueConflict", storedFlowId: storedFlow, storedSeq: seq })
    }
  )
})

describe("boundReason", () => {
  it("keeps a reason that fits", () => {
    expect(boundReason("unsupported_delta")).toBe("unsupported_delta")
    expect(boundReason("")).toBe("")
    const exact = "a".repeat(MaxStoredReasonBytes)
    expect(boundReason(exact)).toBe(exact)
  })

  it("cuts one byte over the bound", () => {
    const cut = boundReason("a".repeat(MaxStoredReasonBytes + 1))
    expect(cut).toBe(`${"a".repeat(MaxStoredReasonBytes - Buffer.byteLength(CutMarker, "utf8"))}${CutMarker}`)
  })

  it.prop(
    "a result fits in the bound in UTF-8, is the reason itself or a prefix of whole characters and the marker",
    [fc.string({ unit: "binary", maxLength: 1500 })],
    ([reason]) => {
      const bounded = boundReason(reason)
      expect(Buffer.byteLength(bounded, "utf8")).toBeLessThanOrEqual(MaxStoredReasonBytes)
      if (Buffer.byteLength(reason, "utf8") <= MaxStoredReasonBytes) {
        expect(bounded).toBe(reason)
      } else {
        expect(bounded.endsWith(CutMarker)).toBe(true)
        const prefix = bounded.slice(0, -CutMarker.length)
        expect(reason.startsWith(prefix)).toBe(true)
        // Never half a surrogate pair: the prefix reads back as the same characters.
        expect(Array.from(prefix).join("")).toBe(prefix)
        expect(/[\uD800-\uDBFF]$/.test(prefix)).toBe(false)
      }
    }
  )
})
