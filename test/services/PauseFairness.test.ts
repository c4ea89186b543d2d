/**
 * Pausing a tenant during an incident: a paused group receives no claim while paused, and every
 * other group and flow keeps the waits it is promised (`GroupFairness.test.ts`'s bounds: a
 * continuously eligible group waits at most the other groups' total weight, a flow of a group at
 * most its siblings'). Random arrivals, retries, quarantines, redrives and pauses and resumes of
 * group G0; every configured backend.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc } from "effect"
import { seedPolicy as seed } from "../../src/domain/Policy.js"
import type { Snapshot } from "../../src/domain/Records.js"
import { backends, describeSkipped } from "../support/backends.js"
import type { Backend } from "../support/backends.js"
import { activeFlows, eligibleFlows, type Op, opArb, replyOf, turnEventLoop } from "../support/fairness.js"
import type { World } from "../support/world.js"

const Flows = 16
const Paused = "G0"

type PauseOp = Op | { readonly _tag: "pause" } | { readonly _tag: "resume" }

const pauseOpArb: fc.Arbitrary<PauseOp> = fc.oneof(
  { arbitrary: opArb(Flows), weight: 10 },
  { arbitrary: fc.constant({ _tag: "pause" as const }), weight: 1 },
  { arbitrary: fc.constant({ _tag: "resume" as const }), weight: 1 }
)

/** Each flow's group (0–3, or -1: none) and each group's weight. */
const shapeArb = fc.record({
  groupOf: fc.array(fc.integer({ min: -1, max: 3 }), { minLength: Flows, maxLength: Flows }),
  groupWeights: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 4, maxLength: 4 })
})
type Shape = typeof shapeArb extends fc.Arbitrary<infer S> ? S : never

const tail = { ...seed, admission: "tail" as const, backoffBase: 0, retryBudget: 1_000, leaseTicks: 1_000 }

interface Wait {
  readonly who: string
  readonly wait: number
  readonly bound: number
}

/** Runs `ops`; answers the waits measured (with their bounds) and how many claims went to G0 while it was paused. */
const run = (w: World, ops: ReadonlyArray<PauseOp>, shape: Shape) =>
  Effect.gen(function*() {
    const flowIndex = (flowId: string) => Number(flowId.slice(1))
    const groupOf = (flowId: string) => shape.groupOf[flowIndex(flowId)]!
    const unitOf = (flowId: string) => (groupOf(flowId) < 0 ? flowId : `G${groupOf(flowId)}`)
    const weightOf = (unit: string) => (unit.startsWith("G") ? shape.groupWeights[Number(unit.slice(1))]! : 1)
    for (const [g, weight] of shape.groupWeights.entries()) yield* w.queue.setGroupWeight({ groupId: `G${g}`, weight })
    let paused = false
    let pausedClaims = 0
    let claims = 0
    let next = 0
    const waits: Array<Wait> = []
    const last = new Map<string, { index: number; bound: number; continuous: boolean }>()
    // What a claim may take: eligible, and not in the paused group.
    const claimable = (snapshot: Snapshot) => new Set([...eligibleFlows(snapshot)].filter((f) => !(paused && unitOf(f) === Paused)))
    const observe = (snapshot: Snapshot) => {
      const units = new Set([...claimable(snapshot)].map(unitOf))
      for (const [unit, state] of last) if (!units.has(unit)) state.continuous = false
    }
    for (const op of ops) {
      if (op._tag === "pause" || op._tag === "resume") {
        // The group exists once its weight is set (above), whether or not it has flows yet.
        yield* (op._tag === "pause" ? w.queue.pause : w.queue.resume)({ group: Paused, reason: "incident" })
        paused = op._tag === "pause"
      } else if (op._tag === "enqueue") {
        const flowId = `f${op.flow}`
        const group = groupOf(flowId) < 0 ? {} : { group: `G${groupOf(flowId)}` }
        yield* w.queue.enqueue({ eventId: `e${next++}`, flowId, body: { delta: 1 }, ...group })
      } else if (op._tag === "redrive") {
        const quarantined = (yield* w.queue.snapshot).events.find((e) => e.state === "quarantined")
        if (quarantined) yield* w.queue.redrive({ eventId: quarantined.eventId, expectedGeneration: quarantined.generation, reason: "test" })
      } else {
        const before = yield* w.queue.snapshot
        observe(before)
        const claimed = yield* w.queue.claim
        if (claimed._tag === "Idle") {
          expect(claimable(before).size).toBe(0)
        } else {
          const flow = claimed.event.flowId
          const unit = unitOf(flow)
          if (paused && unit === Paused) pausedClaims++
          const previous = last.get(unit)
          if (previous?.continuous) waits.push({ who: unit, wait: claims - previous.index - 1, bound: previous.bound })
          const others = new Set([...activeFlows(before)].map(unitOf).filter((u) => u !== unit))
          last.set(unit, { index: claims, bound: [...others].reduce((sum, u) => sum + weightOf(u), 0), continuous: true })
          claims++
          yield* w.queue.settle(claimed.token, replyOf(op.reply))
        }
      }
      observe(yield* w.queue.snapshot)
    }
    return { waits, pausedClaims }
  })

const runs = { sqlite: 30, postgres: 8 } as const

const suite = (backend: Backend) => {
  const numRuns = backend.name.startsWith("postgres") ? runs.postgres : runs.sqlite
  describe(`pause and fairness (${backend.name})`, () => {
    it.scoped.prop(
      `a paused group receives no claim while paused; the others' waits stay within their bounds (${numRuns} runs)`,
      [fc.array(pauseOpArb, { minLength: 20, maxLength: 120 }), shapeArb],
      ([ops, shape]) =>
        Effect.gen(function*() {
          const w = yield* backend.world({ policy: tail })
          const { pausedClaims, waits } = yield* run(w, [{ _tag: "pause" }, ...ops], shape)
          yield* turnEventLoop
          expect(pausedClaims).toBe(0)
          for (const { bound, wait, who } of waits) expect(wait, who).toBeLessThanOrEqual(bound)
        }),
      { fastCheck: { numRuns }, timeout: numRuns * 10_000 }
    )
  })
}

for (const backend of backends) suite(backend)
describeSkipped(suite)
