/**
 * The public `MemoryRelayQueue` layer: a new, empty store per layer, its options checked. It is
 * the SQLite store on a `:memory:` database, which the contract suite (test/services) and the
 * model-based test (test/model) run the whole protocol on.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { seedPolicy } from "../../src/domain/Policy.js"
import * as MemoryRelayQueue from "../../src/layers/MemoryRelayQueue.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"

describe("MemoryRelayQueue", () => {
  it.effect("provides RelayQueue: enqueue, claim and settle as on SQLite; each layer is a new, empty store", () =>
    Effect.gen(function*() {
      const run = Effect.gen(function*() {
        const queue = yield* RelayQueue
        expect(yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })).toEqual({ _tag: "Enqueued", seq: 1 })
        const claimed = yield* queue.claim
        if (claimed._tag !== "Claimed") return expect.fail("expected a claim")
        expect(claimed.leaseUntil).toBe(5)
        expect(yield* queue.settle(claimed.token, { _tag: "Accepted" })).toEqual({ _tag: "Acked" })
        return (yield* queue.snapshot).events.map((e) => [e.eventId, e.state])
      })
      const layer = MemoryRelayQueue.layer({ policy: seedPolicy })
      expect(yield* Effect.provide(run, layer)).toEqual([["A1", "acked"]])
      expect(yield* Effect.provide(run, layer)).toEqual([["A1", "acked"]])
    }))

  it.scoped("an invalid policy is refused with InvalidInput", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(MemoryRelayQueue.make({ policy: { retryBudget: 0 } }))
      expect(exit).toMatchObject({ _tag: "Failure", cause: { error: { _tag: "InvalidInput" } } })
    }))
})
