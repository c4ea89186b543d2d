/**
 * Batches keep the protocol: `claimBatch(n)` takes what n single claims would, `settleBatch`
 * gives what single settles would.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { Claimed, DeliveryReply } from "../../src/domain/Outcomes.js"
import { backends, describeSkipped } from "../support/backends.js"
import type { Backend } from "../support/backends.js"
import { at } from "../support/world.js"
import type { World } from "../support/world.js"

// A mixed store: flows with several events, one quarantined head, one head in backoff.
const seed = (w: World) =>
  Effect.gen(function*() {
    yield* w.inbox.receive({ eventId: "Q1", flowId: "Z", seq: 1, body: { delta: 1 } })
    for (const flow of ["A", "B", "C", "D", "E"]) {
      for (let i = 1; i <= 3; i++) yield* w.queue.enqueue({ eventId: `${flow}${i}`, flowId: flow, body: { delta: i } })
    }
    yield* w.queue.enqueue({ eventId: "Q1", flowId: "Q", body: { delta: 1 } })
    yield* w.queue.enqueue({ eventId: "R1", flowId: "R", body: { delta: 1 } })
    // A1 acked; Q1 quarantined (id conflict); R1 retried (back off until 2).
    for (let i = 0; i < 7; i++) {
      const claimed = yield* w.claim
      const reply = claimed.event.flowId === "R" ? { _tag: "Retry", reason: "unavailable" } as const : yield* w.deliver(claimed)
      yield* w.queue.settle(claimed.token, reply)
    }
  })

const ids = (claims: ReadonlyArray<typeof Claimed.Type>) => claims.map((c) => c.event.eventId)

// Flows in groups (tenants): `groups` groups of `flows` flows with two events each, the second
// group of weight 3, and three flows of no group. A claim reads few flows of each group first and
// walks again when the rotation may want more: with 3 groups a batch of 20 or 50 does; with 12,
// a batch of 20 does not.
const seedGroups = (w: World, groups: number, flows: number) =>
  Effect.gen(function*() {
    yield* w.queue.enqueueBatch(Array.from({ length: groups * flows * 2 }, (_, i) => ({
      eventId: `G${i}`,
      flowId: `t${i % groups}-f${Math.floor(i / groups) % flows}`,
      group: `t${i % groups}`,
      body: { delta: 1 }
    })))
    for (const flowId of ["s1", "s2", "s3"]) yield* w.queue.enqueue({ eventId: `${flowId}-1`, flowId, body: { delta: 1 } })
    yield* w.queue.setGroupWeight({ groupId: "t1", weight: 3 })
  })


const suite = (backend: Backend) => {
  describe("claimBatch", () => {
    for (const n of [1, 3, 5, 50]) {
      it.scoped(`claimBatch(${n}) claims exactly what ${n} single claims would`, () =>
        Effect.gen(function*() {
          const single = yield* backend.world()
          const batched = yield* backend.world()
          yield* seed(single)
          yield* seed(batched)
          yield* at(3)
          const one: Array<string> = []
          for (let i = 0; i < n; i++) {
            const outcome = yield* single.queue.claim
            if (outcome._tag === "Claimed") one.push(outcome.event.eventId)
          }
          const many = yield* batched.queue.claimBatch(n)
          expect(ids(many)).toEqual(one)
          expect(new Set(many.map((c) => c.event.flowId)).size).toBe(many.length)
          expect(yield* batched.queue.snapshot).toEqual(yield* single.queue.snapshot)
        }))
    }

    for (const [groups, flows, n] of [[3, 20, 9], [3, 20, 20], [3, 20, 50], [12, 3, 20]] as const) {
      it.scoped(`with ${groups} groups of ${flows} flows, claimBatch(${n}) claims exactly what ${n} single claims would`, () =>
        Effect.gen(function*() {
          const single = yield* backend.world()
          const batched = yield* backend.world()
          yield* seedGroups(single, groups, flows)
          yield* seedGroups(batched, groups, flows)
          const one: Array<string> = []
          for (let i = 0; i < n; i++) {
            const outcome = yield* single.queue.claim
            if (outcome._tag === "Claimed") one.push(outcome.event.eventId)
          }
          expect(one).toHaveLength(n)
          const many = yield* batched.queue.claimBatch(n)
          expect(ids(many)).toEqual(one)
          expect(yield* batched.queue.snapshot).toEqual(yield* single.queue.snapshot)
        }))
    }

    it.scoped("claimBatch is empty when nothing is eligible and refuses a size outside 1..10000", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        expect(yield* w.queue.claimBatch(4)).toEqual([])
        for (const bad of [0, -1, 1.5, 10_001]) {
          const exit = yield* Effect.exit(w.queue.claimBatch(bad))
          expect(exit).toMatchObject({ _tag: "Failure", cause: { error: { _tag: "InvalidInput" } } })
        }
      }))
  })

  describe("settleBatch", () => {
    it.scoped("one outcome per item, the same as single settles, stale items included", () =>
      Effect.gen(function*() {
        const single = yield* backend.world({ maxDelta: 2 })
        const batched = yield* backend.world({ maxDelta: 2 })
        const unavailable: DeliveryReply = { _tag: "Retry", reason: "unavailable" }
        const replies = (w: World) =>
          Effect.gen(function*() {
            for (const flow of ["A", "B", "C", "D"]) {
              for (let i = 1; i <= 2; i++) yield* w.queue.enqueue({ eventId: `${flow}${i}`, flowId: flow, body: { delta: i + (flow === "C" ? 5 : 0) } })
            }
            const claims = yield* w.queue.claimBatch(4)
            const items = yield* Effect.forEach(claims, (claimed) =>
              claimed.event.flowId === "D"
                ? Effect.succeed({ token: claimed.token, reply: unavailable })
                : Effect.map(w.deliver(claimed), (reply) => ({ token: claimed.token, reply })))
            // A forged generation and a repeated token: both Stale.
            return [...items, { token: { eventId: "A1", generation: 9 }, reply: { _tag: "Accepted" } as const }, items[1]!]
          })
        const singleItems = yield* replies(single)
        const batchItems = yield* replies(batched)
        const one = yield* Effect.forEach(singleItems, (item) => single.queue.settle(item.token, item.reply))
        const many = yield* batched.queue.settleBatch(batchItems)
        expect(many).toEqual(one)
        expect(many.map((o) => o._tag)).toEqual(["Acked", "Acked", "Quarantined", "RetryScheduled", "Stale", "Stale"])
        expect(yield* batched.queue.snapshot).toEqual(yield* single.queue.snapshot)
      }))

    it.scoped("one malformed item refuses the whole batch and settles nothing", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        const claimed = yield* w.claim
        const before = yield* w.queue.snapshot
        const exit = yield* Effect.exit(
          w.queue.settleBatch([{ token: claimed.token, reply: { _tag: "Accepted" } }, { token: claimed.token, reply: { _tag: "Nope" } as never }])
        )
        expect(exit).toMatchObject({ _tag: "Failure", cause: { error: { _tag: "InvalidInput" } } })
        expect(yield* w.queue.snapshot).toEqual(before)
      }))
  })

  describe("enqueueBatch", () => {
    it.scoped("stores what single enqueues would, in order", () =>
      Effect.gen(function*() {
        const single = yield* backend.world()
        const batched = yield* backend.world()
        const inputs = ["A", "B", "A", "C", "A"].map((flowId, i) => ({ eventId: `e${i}`, flowId, body: { delta: i + 1 } }))
        const one = yield* Effect.forEach(inputs, (input) => single.queue.enqueue(input))
        const many = yield* batched.queue.enqueueBatch([...inputs, inputs[0]!])
        expect(many).toEqual([...one, { _tag: "Existing", seq: 1 }])
        expect(many.map((r) => r.seq)).toEqual([1, 1, 2, 1, 3, 1])
        expect(yield* batched.queue.snapshot).toEqual(yield* single.queue.snapshot)
      }))

    it.scoped("one conflicting or invalid item refuses the whole batch and stores nothing", () =>
      Effect.gen(function*() {
        const w = yield* backend.world()
        yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        const before = yield* w.queue.snapshot
        const conflict = yield* Effect.exit(w.queue.enqueueBatch([
          { eventId: "B1", flowId: "B", body: { delta: 1 } },
          { eventId: "A1", flowId: "A", body: { delta: 2 } }
        ]))
        expect(conflict).toMatchObject({ _tag: "Failure", cause: { error: { _tag: "EnqueueConflict" } } })
        const invalid = yield* Effect.exit(w.queue.enqueueBatch([
          { eventId: "B1", flowId: "B", body: { delta: 1 } },
          { eventId: "", flowId: "B", body: { delta: 1 } }
        ]))
        expect(invalid).toMatchObject({ _tag: "Failure", cause: { error: { _tag: "InvalidInput" } } })
        expect(yield* w.queue.snapshot).toEqual(before)
      }))
  })

}

for (const backend of backends) describe(backend.name, () => suite(backend))
describeSkipped(suite)
