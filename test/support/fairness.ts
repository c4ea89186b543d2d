/**
 * What the fairness property tests share: which flows are eligible or active in a snapshot (time
 * stands at 0 and nothing stays in flight), the reply a step sends, and a turn of the event loop.
 */
import { expect } from "@effect/vitest"
import { Effect, FastCheck as fc } from "effect"
import type { DeliveryReply } from "../../src/domain/Outcomes.js"
import type { Snapshot } from "../../src/domain/Records.js"
import type { EnqueueInput } from "../../src/services/RelayQueue.js"
import type { World } from "./world.js"

/** One step of a workload: an arrival on flow `f<flow>`, a claim answered by `reply`, or a redrive. */
export type Op =
  | { readonly _tag: "enqueue"; readonly flow: number }
  | { readonly _tag: "step"; readonly reply: "ack" | "retry" | "reject" }
  | { readonly _tag: "redrive" }

/** Workload steps over `flows` flows: arrivals, claims (half of them acked) and now and then a redrive. */
export const opArb = (flows: number): fc.Arbitrary<Op> =>
  fc.oneof(
    { arbitrary: fc.record({ _tag: fc.constant("enqueue" as const), flow: fc.integer({ min: 0, max: flows - 1 }) }), weight: 4 },
    { arbitrary: fc.record({ _tag: fc.constant("step" as const), reply: fc.constantFrom("ack" as const, "ack" as const, "retry" as const, "reject" as const) }), weight: 6 },
    { arbitrary: fc.constant({ _tag: "redrive" as const }), weight: 1 }
  )

/**
 * Runs `ops` on `w`'s queue: an arrival enqueues the next event id on its flow (`arrival` gives the
 * rest of the input), a redrive releases the first quarantined event, a step claims (idle only
 * when no flow is eligible; otherwise an eligible flow), tells `claimed` the flow and the snapshot
 * taken before the claim, and settles with the step's reply. `observe` sees a snapshot before each
 * claim and after each op.
 */
export const runOps = (
  w: World,
  ops: ReadonlyArray<Op>,
  handlers: {
    readonly arrival: (flowId: string) => Omit<EnqueueInput, "eventId" | "flowId" | "body">
    readonly observe: (snapshot: Snapshot) => void
    readonly claimed: (flowId: string, before: Snapshot) => void
  }
) =>
  Effect.gen(function*() {
    let next = 0
    const observe = Effect.tap(w.queue.snapshot, (snapshot) => handlers.observe(snapshot))
    for (const op of ops) {
      if (op._tag === "enqueue") {
        const flowId = `f${op.flow}`
        yield* w.queue.enqueue({ eventId: `e${next++}`, flowId, body: { delta: 1 }, ...handlers.arrival(flowId) })
      } else if (op._tag === "redrive") {
        const quarantined = (yield* w.queue.snapshot).events.find((e) => e.state === "quarantined")
        if (quarantined) {
          yield* w.queue.redrive({ eventId: quarantined.eventId, expectedGeneration: quarantined.generation, reason: "test" })
        }
      } else {
        const before = yield* observe
        const eligible = eligibleFlows(before)
        const claimed = yield* w.queue.claim
        if (claimed._tag === "Idle") {
          expect(eligible.size).toBe(0)
          continue
        }
        expect(eligible.has(claimed.event.flowId)).toBe(true)
        handlers.claimed(claimed.event.flowId, before)
        yield* w.queue.settle(claimed.token, replyOf(op.reply))
      }
      yield* observe
    }
  })

/** Flows with a head that can be claimed now. */
export const eligibleFlows = (snapshot: Snapshot): Set<string> => {
  const heads = new Map<string, Snapshot["events"][number]>()
  for (const e of snapshot.events) if (e.state !== "acked" && !heads.has(e.flowId)) heads.set(e.flowId, e)
  return new Set([...heads.values()].filter((h) => h.state === "ready" && h.nextAt <= 0).map((h) => h.flowId))
}

/** Flows with unacked events. */
export const activeFlows = (snapshot: Snapshot): Set<string> => new Set(snapshot.events.filter((e) => e.state !== "acked").map((e) => e.flowId))

/** The receiver's reply of a step: ack, ask for a retry, or refuse (quarantine). */
export const replyOf = (reply: "ack" | "retry" | "reject"): DeliveryReply =>
  reply === "ack" ? { _tag: "Accepted" } : reply === "retry" ? { _tag: "Retry", reason: "unavailable" } : { _tag: "Rejected", code: "refused" }

/**
 * Lets the event loop turn once (a macrotask, not the TestClock): SQLite work runs synchronously,
 * and a property that never yields for a minute makes vitest's worker RPC time out
 * ("Timeout calling onTaskUpdate") even when every run passes.
 */
export const turnEventLoop = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})
