import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { makeWorld } from "../support/world.js"

describe("round robin", () => {
  it.scoped("dispatches A1 B1 C1 A2 B2 C2 A3 B3 C3", () =>
    Effect.gen(function*() {
      const w = yield* makeWorld()
      for (const f of ["A", "B", "C"]) for (let i = 1; i <= 3; i++) yield* w.queue.enqueue({ eventId: `${f}${i}`, flowId: f, body: { delta: i } })
      const order: Array<string> = []
      for (let i = 0; i < 9; i++) order.push((yield* w.step)!.eventId)
      expect(order).toEqual(["A1", "B1", "C1", "A2", "B2", "C2", "A3", "B3", "C3"])
    }))
})
