/**
 * What the fairness property tests share: which flows are eligible or active in a snapshot (time
 * stands at 0 and nothing stays in flight), the reply a step sends, and a turn of the event loop.
 */
import { Effect } from "effect"
import type { DeliveryReply } from "../../src/domain/Outcomes.js"
import type { Snapshot } from "../../src/domain/Records.js"

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
