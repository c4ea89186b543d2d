/**
 * Exact claims: `settleAndClaim`'s claim chooses from a walk sent with the settle's read, before
 * the settle's writes and at the time read before the transaction's first round trip — and walks
 * again after the writes, at the decision's time, wherever that walk could differ from one made
 * then: a flow the settle changed is in a group, or a head became eligible between the two times,
 * or the time went back. Each case here claims what a claim after the settle claims. A claim
 * alone sends its walk with the clock read, under the same guards.
 */
import { it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { expect } from "vitest"
import { PgRelayQueue } from "../../src/index.js"
import type { RelayQueueService } from "../../src/index.js"
import type { Claimed } from "../../src/domain/Outcomes.js"
import { StatementLog } from "../../src/layers/internal/Store.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

/** `effect`'s result and how many round trips it made. */
const counted = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    let trips = 0
    const result = yield* Effect.provideService(effect, StatementLog, { record: undefined, roundTrip: () => trips++ })
    return [result, trips] as const
  })

/**
 * A clock the test sets: `currentTimeMillis` answers each of `script` once, in order, then `time`
 * (the queue reads its time there; spans and the rest read the system's).
 */
const scriptedClock = () => {
  const state = { time: 0, script: [] as Array<number> }
  const millis = () => state.script.shift() ?? state.time
  const clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => Date.now(),
    currentTimeMillis: Effect.sync(millis),
    unsafeCurrentTimeNanos: () => process.hrtime.bigint(),
    currentTimeNanos: Effect.sync(() => process.hrtime.bigint()),
    sleep: (duration) => Effect.sleep(duration).pipe(Effect.withClock(Clock.make()))
  }
  return { state, clock }
}

const open = (url: string, policy?: { readonly leaseTicks: number }) =>
  Effect.flatMap(freshSchema(url), (schema) => PgRelayQueue.make({ url: schema.url, maxConnections: 1, claims: "exact", ...(policy === undefined ? {} : { policy }) }))

const claimOne = (queue: RelayQueueService) =>
  Effect.flatMap(queue.claimUpTo(1), ({ claims: [claimed] }) => (claimed === undefined ? Effect.dieMessage("expected a claim") : Effect.succeed(claimed)))

describePg("PostgreSQL exact claims: the claim's walk sent early (settleAndClaim: before the settle's writes; a claim alone: with the clock read)", (url) => {
  it.scopedLive("a settled flow of no group: two round trips, and the claim takes what a claim after the settle takes", () =>
    Effect.gen(function*() {
      // Two stores, the same events: one settles and claims in one transaction, the other in two.
      const [together, apart] = [yield* open(url), yield* open(url)]
      const events = [
        ...[1, 2].map((i) => ({ eventId: `A${i}`, flowId: "A", body: {} })),
        { eventId: "B1", flowId: "B", body: {} },
        { eventId: "C1", flowId: "C", body: {} }
      ]
      for (const queue of [together, apart]) yield* queue.enqueueBatch(events)
      // A1 then B1 claimed; A1 acked, B1 retried later: A2 comes after C1 (a claim moves its flow
      // behind every other), and B waits for its backoff.
      const [a1, b1] = [yield* claimOne(together), yield* claimOne(together)]
      yield* claimOne(apart)
      yield* claimOne(apart)
      const [result, trips] = yield* counted(together.settleAndClaim([{ token: a1.token, reply: { _tag: "Accepted" } }, { token: b1.token, reply: { _tag: "Retry", reason: "later" } }], 2))
      const settled = yield* apart.settleBatch([{ token: a1.token, reply: { _tag: "Accepted" } }, { token: b1.token, reply: { _tag: "Retry", reason: "later" } }])
      const { claims } = yield* apart.claimUpTo(2)
      expect(trips).toBe(2)
      expect(result.outcomes.map((o) => o._tag)).toEqual(settled.map((o) => o._tag))
      expect(result.outcomes.map((o) => o._tag)).toEqual(["Acked", "RetryScheduled"])
      expect(result.claims.map((c) => c.event.eventId)).toEqual(claims.map((c) => c.event.eventId))
      expect(result.claims.map((c) => c.event.eventId)).toEqual(["C1", "A2"])
    }))

  it.scopedLive("a settled flow of a group: the claim walks again after the settle's writes, and takes what a claim after the settle takes", () =>
    Effect.gen(function*() {
      const [together, apart] = [yield* open(url), yield* open(url)]
      const events = [
        ...[1, 2].map((i) => ({ eventId: `A${i}`, flowId: "A", group: "g", body: {} })),
        { eventId: "B1", flowId: "B", group: "g", body: {} },
        { eventId: "C1", flowId: "C", body: {} }
      ]
      for (const queue of [together, apart]) yield* queue.enqueueBatch(events)
      const a1 = yield* claimOne(together)
      yield* claimOne(apart)
      const [result, trips] = yield* counted(together.settleAndClaim([{ token: a1.token, reply: { _tag: "Accepted" } }], 2))
      yield* apart.settle(a1.token, { _tag: "Accepted" })
      const { claims } = yield* apart.claimUpTo(2)
      expect(trips).toBe(3)
      expect(result.outcomes).toEqual([{ _tag: "Acked" }])
      expect(result.claims.map((c) => c.event.eventId)).toEqual(claims.map((c) => c.event.eventId))
    }))

  /**
   * R first in turn, then S: at 0 R1 is claimed (its lease ends at 1,000), at 600 S1 (1,600); then
   * `step` (given S1's claim) runs with the walk's time `walkAt` and the decision's `decideAt`.
   */
  const atTimes = <A, E>(walkAt: number, decideAt: number, step: (queue: RelayQueueService, s1: typeof Claimed.Type) => Effect.Effect<A, E>) =>
    Effect.gen(function*() {
      const { clock, state } = scriptedClock()
      const queue = yield* open(url, { leaseTicks: 1_000 })
      return yield* Effect.gen(function*() {
        yield* queue.enqueue({ eventId: "R1", flowId: "R", body: {} })
        yield* queue.enqueueBatch([{ eventId: "S1", flowId: "S", body: {} }, { eventId: "S2", flowId: "S", body: {} }])
        yield* claimOne(queue)
        state.time = 600
        const s1 = yield* claimOne(queue)
        state.script.push(walkAt, decideAt)
        state.time = decideAt
        return yield* step(queue, s1)
      }).pipe(Effect.withClock(clock))
    })

  /** S1 acked and one head claimed in one transaction (`atTimes`): the claimed event's id. */
  const settleAt = (walkAt: number, decideAt: number) =>
    atTimes(walkAt, decideAt, (queue, s1) =>
      Effect.map(queue.settleAndClaim([{ token: s1.token, reply: { _tag: "Accepted" } }], 1), (result) => {
        expect(result.outcomes).toEqual([{ _tag: "Acked" }])
        return result.claims.map((c) => c.event.eventId)
      }))

  it.scopedLive("a head that became eligible between the walk's time and the decision's is claimed in its turn", () =>
    Effect.gen(function*() {
      // At 700 R1 is still leased; at 1,500 it is eligible again, and R (claimed before S) comes before S.
      expect(yield* settleAt(700, 1_500)).toEqual(["R1"])
    }))

  it.scopedLive("a time that went back between the walk's and the decision's: the claim takes only what is eligible at the decision's", () =>
    Effect.gen(function*() {
      // At 1,500 R1's lease is over; at 700 it is still leased.
      expect(yield* settleAt(1_500, 700)).toEqual(["S2"])
    }))

  /** A claim alone (`atTimes`): what it claimed, when it says to look again, and its round trips. */
  const claimAt = (walkAt: number, decideAt: number) =>
    atTimes(walkAt, decideAt, (queue) =>
      Effect.map(counted(queue.claimUpTo(1)), ([{ claims, wakeAt }, trips]) => ({ claimed: claims.map((c) => c.event.eventId), wakeAt, trips })))

  it.scopedLive("a claim alone: its walk goes with the clock read; idle, it says when the next head is due without another read", () =>
    Effect.gen(function*() {
      // At 700 both heads are leased: R1's lease ends first. One round trip, and COMMIT.
      expect(yield* claimAt(700, 700)).toEqual({ claimed: [], wakeAt: 1_000, trips: 2 })
      // At 1,200 R1 is eligible again: the walk found it; its writes go with COMMIT.
      expect(yield* claimAt(1_200, 1_200)).toEqual({ claimed: ["R1"], wakeAt: undefined, trips: 2 })
    }))

  it.scopedLive("a claim alone whose head became eligible between the walk's time and the decision's, or whose time went back: it walks again at the decision's", () =>
    Effect.gen(function*() {
      // Walked at 700 (R1 leased), decided at 1,200: R1 is claimed, by a walk at 1,200.
      expect(yield* claimAt(700, 1_200)).toEqual({ claimed: ["R1"], wakeAt: undefined, trips: 3 })
      // Walked at 1,200 (R1 eligible), decided at 700: nothing is eligible; R1 is due at 1,000.
      expect(yield* claimAt(1_200, 700)).toMatchObject({ claimed: [], wakeAt: 1_000 })
    }))
})
