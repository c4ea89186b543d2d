/**
 * Operator reads: events by state and flow (paged), flows (paged), one event with its audit rows,
 * the audit log. Read-only, typed errors on bad input.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { backends, describeSkipped } from "../support/backends.js"
import type { Backend } from "../support/backends.js"

const suite = (backend: Backend) => {
  it.scoped("lists, pages and inspects what an operator needs to find a stuck head", () =>
    Effect.gen(function*() {
      const w = yield* backend.world({ maxDelta: 5 })
      for (const [eventId, flowId, delta] of [["A1", "A", 10], ["A2", "A", 1], ["B1", "B", 1], ["B2", "B", 2], ["C1", "C", 3]] as const) {
        yield* w.queue.enqueue({ eventId, flowId, body: { delta } })
      }
      for (let i = 0; i < 4; i++) yield* w.step
      const quarantined = yield* w.queue.events({ state: "quarantined" })
      expect(quarantined.map((e) => [e.eventId, e.reason])).toEqual([["A1", "unsupported_delta"]])
      expect((yield* w.queue.events({ flowId: "B" })).map((e) => [e.eventId, e.state])).toEqual([["B1", "acked"], ["B2", "acked"]])
      const page1 = yield* w.queue.events({ limit: 2 })
      const page2 = yield* w.queue.events({ limit: 2, afterEventId: page1[1]!.eventId })
      expect([...page1, ...page2].map((e) => e.eventId)).toEqual(["A1", "A2", "B1", "B2"])
      expect((yield* w.queue.flows({ limit: 2 })).map((f) => f.flowId)).toEqual(["A", "B"])
      expect((yield* w.queue.flows({ after: "B" })).map((f) => [f.flowId, f.headSeq])).toEqual([["C", null]])

      yield* w.queue.redrive({ eventId: "A1", expectedGeneration: 1, reason: "limit raised", actor: "alice" })
      const shown = yield* w.queue.inspect("A1")
      expect(shown.event).toMatchObject({ eventId: "A1", state: "ready", generation: 2, lifetimeAttempts: 1 })
      expect(shown.audit).toEqual([{ eventId: "A1", reason: "limit raised", generation: 2, tick: 0, actor: "alice", action: "redrive", target: null }])
      expect(yield* w.queue.audit()).toEqual(shown.audit)
      expect(yield* w.queue.audit({ eventId: "B1" })).toEqual([])
    }))

  it.scoped("a flow's events are listed in seq order and page by seq, whatever their ids", () =>
    Effect.gen(function*() {
      const w = yield* backend.world()
      // Ids whose order is not the seq order: F-10 … F-12 sort before F-2.
      for (let n = 1; n <= 12; n++) yield* w.queue.enqueue({ eventId: `F-${n}`, flowId: "F", body: { delta: 1 } })
      yield* w.queue.enqueue({ eventId: "E-1", flowId: "E", body: { delta: 1 } })
      const seqs = (page: ReadonlyArray<{ readonly seq: number; readonly flowId: string }>) => page.map((e) => [e.flowId, e.seq])
      const all = Array.from({ length: 12 }, (_, i) => ["F", i + 1])
      expect(seqs(yield* w.queue.events({ flowId: "F" }))).toEqual(all)
      const first = yield* w.queue.events({ flowId: "F", limit: 5 })
      const second = yield* w.queue.events({ flowId: "F", limit: 5, afterSeq: first[4]!.seq })
      const third = yield* w.queue.events({ flowId: "F", limit: 5, afterSeq: second[4]!.seq })
      expect(seqs([...first, ...second, ...third])).toEqual(all)
      expect(seqs(yield* w.queue.events({ flowId: "F", state: "ready", afterSeq: 10 }))).toEqual([["F", 11], ["F", 12]])
      // Without a flow, still event-id order.
      expect((yield* w.queue.events({ limit: 4 })).map((e) => e.eventId)).toEqual(["E-1", "F-1", "F-10", "F-11"])
      const tag = <A, E extends { readonly _tag: string }>(effect: Effect.Effect<A, E>) =>
        Effect.match(effect, { onFailure: (e) => e._tag, onSuccess: () => "ok" })
      expect(yield* tag(w.queue.events({ afterSeq: 3 }))).toBe("InvalidInput")
      expect(yield* tag(w.queue.events({ flowId: "F", afterEventId: "F-3" }))).toBe("InvalidInput")
      expect(yield* tag(w.queue.events({ flowId: "F", afterSeq: -1 }))).toBe("InvalidInput")
    }))

  it.scoped("bad filters and unknown ids are typed errors", () =>
    Effect.gen(function*() {
      const w = yield* backend.world()
      const tag = <A, E extends { readonly _tag: string }>(effect: Effect.Effect<A, E>) =>
        Effect.match(effect, { onFailure: (e) => e._tag, onSuccess: () => "ok" })
      expect(yield* tag(w.queue.inspect("nope"))).toBe("EventNotFound")
      expect(yield* tag(w.queue.inspect(""))).toBe("InvalidInput")
      expect(yield* tag(w.queue.events({ state: "lost" as never }))).toBe("InvalidInput")
      expect(yield* tag(w.queue.events({ limit: 0 }))).toBe("InvalidInput")
      expect(yield* tag(w.queue.flows({ limit: 10_001 }))).toBe("InvalidInput")
    }))
}

for (const backend of backends) describe(backend.name, () => suite(backend))
describeSkipped(suite)
