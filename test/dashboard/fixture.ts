/**
 * A queue store holding every state the dashboard shows, built through the public `RelayQueue`
 * on the real clock: acked and drained flows, a ready head behind an acked one, a head waiting
 * out its backoff, an in-flight head, quarantined heads (one redriven before, so with an audit row
 * and two lifetime attempts), and ids, a reason and a body carrying markup.
 */
import { Effect } from "effect"
import type { DeliveryReply } from "../../src/domain/Outcomes.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"

/** An event id and a flow id that would run script if they reached a page unescaped. */
export const scriptId = "<script>window.__pwned = 1</script>"
export const scriptFlow = "<img src=x onerror=\"window.__pwned = 2\">"

/** The policy of the fixture store: leases and backoffs long enough that states hold during a test. */
export const policy = { leaseTicks: "10 minutes", retryBudget: 3, backoffBase: "10 minutes", backoffCap: "1 hour" } as const

/** The reply each event gets when claimed. */
const replies: Record<string, DeliveryReply | "keep"> = {
  A1: { _tag: "Accepted" },
  B1: { _tag: "Rejected", code: "unsupported_delta" },
  C1: "keep",
  D1: { _tag: "Rejected", code: "unsupported_delta" },
  E1: { _tag: "Accepted" },
  W1: { _tag: "Retry", reason: "unavailable" },
  [scriptId]: { _tag: "Rejected", code: "<script>window.__pwned = 3</script>" }
}

/** Fills the `RelayQueue` in context; returns nothing (read it back through the service). */
export const fill = Effect.gen(function*() {
  const queue = yield* RelayQueue
  yield* queue.enqueueBatch([
    { eventId: "A1", flowId: "account-A", body: { delta: 1 } },
    { eventId: "A2", flowId: "account-A", body: { delta: 2 } },
    { eventId: "A3", flowId: "account-A", body: { delta: 3 } },
    { eventId: "B1", flowId: "account-B", body: { delta: 10_000 } },
    { eventId: "B2", flowId: "account-B", body: { delta: 1 } },
    { eventId: "C1", flowId: "account-C", body: { delta: 3 } },
    { eventId: "D1", flowId: "account-D", body: { delta: 500 } },
    { eventId: "E1", flowId: "account-E", body: { delta: 4 } },
    { eventId: "W1", flowId: "account-W", body: { delta: 5 } },
    { eventId: scriptId, flowId: scriptFlow, body: { note: "</pre><script>window.__pwned = 4</script>", delta: 1 } }
  ])
  const step = Effect.gen(function*() {
    const claimed = yield* queue.claimBatch(100)
    for (const c of claimed) {
      const reply = replies[c.event.eventId] ?? { _tag: "Accepted" as const }
      if (reply !== "keep") yield* queue.settle(c.token, reply)
    }
  })
  yield* step
  // D1 was quarantined once, redriven with a reason, and refused again: an audit row, lifetime 2.
  const d1 = yield* queue.inspect("D1")
  yield* queue.redrive({ eventId: "D1", expectedGeneration: d1.event.generation, reason: "receiver limit raised to 1000", actor: "alice" })
  yield* step
})
