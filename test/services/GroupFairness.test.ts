/**
 * Fairness across tenants: flows in groups. With `admission: "tail"`, claims rotate across groups
 * (a flow of no group is a group of its own) and, inside a group, across its flows, so
 *
 * - between two claims of a continuously eligible group there are at most as many claims as the
 *   total weight of the other groups that had unacked events at the group's previous claim, and
 * - between two claims of a continuously eligible flow of a group there are at most as many
 *   claims of the group's other flows as their total weight (those with unacked events then).
 *
 * Random arrivals, retries, quarantines, redrives, flow and group weights; every configured backend.
 * The same measure fails when the workload's enqueues leave the groups out (control).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc } from "effect"
import { seedPolicy as seed } from "../../src/domain/Policy.js"
import { backends, describeSkipped } from "../support/backends.js"
import type { Backend } from "../support/backends.js"
import { activeFlows, eligibleFlows, type Op, opArb, runOps, turnEventLoop } from "../support/fairness.js"
import type { World } from "../support/world.js"

const Flows = 24

/** A workload's shape: each flow's group (index into the groups, or -1: none) and weight, each group's weight. */
interface Shape {
  readonly groupOf: ReadonlyArray<number>
  readonly flowWeights: ReadonlyArray<number>
  readonly groupWeights: ReadonlyArray<number>
}

interface Wait {
  readonly level: "group" | "flow"
  readonly who: string
  readonly wait: number
  readonly bound: number
}

/**
 * Runs `ops` and measures the waits of both levels with their bounds. `grouped: false` sends the
 * same workload without groups (the measure still counts by group: the control).
 */
const measureWaits = (w: World, ops: ReadonlyArray<Op>, shape: Shape, grouped: boolean) =>
  Effect.gen(function*() {
    const flowIndex = (flowId: string) => Number(flowId.slice(1))
    const groupOf = (flowId: string) => shape.groupOf[flowIndex(flowId)]!
    const unitOf = (flowId: string) => (groupOf(flowId) < 0 ? flowId : `G${groupOf(flowId)}`)
    const weightOf = (unit: string) => (unit.startsWith("G") ? shape.groupWeights[Number(unit.slice(1))]! : shape.flowWeights[flowIndex(unit)]!)
    if (grouped) {
      for (const [g, weight] of shape.groupWeights.entries()) yield* w.queue.setGroupWeight({ groupId: `G${g}`, weight })
    }
    const waits: Array<Wait> = []
    // Per unit: the index of its last claim among all claims. Per grouped flow: among its group's claims.
    const lastUnit = new Map<string, { index: number; bound: number; continuous: boolean }>()
    const lastFlow = new Map<string, { index: number; bound: number; continuous: boolean }>()
    const groupClaims = new Map<string, number>()
    let claims = 0
    yield* runOps(w, ops, {
      arrival: (flowId) => ({ weight: shape.flowWeights[flowIndex(flowId)]!, ...(grouped && groupOf(flowId) >= 0 ? { group: `G${groupOf(flowId)}` } : {}) }),
      // A unit or flow that stops being eligible at any moment starts over.
      observe: (snapshot) => {
        const eligible = eligibleFlows(snapshot)
        const units = new Set([...eligible].map(unitOf))
        for (const [unit, state] of lastUnit) if (!units.has(unit)) state.continuous = false
        for (const [flow, state] of lastFlow) if (!eligible.has(flow)) state.continuous = false
      },
      claimed: (flow, before) => {
        const unit = unitOf(flow)
        const active = [...activeFlows(before)]
        const previousUnit = lastUnit.get(unit)
        if (previousUnit?.continuous) waits.push({ level: "group", who: unit, wait: claims - previousUnit.index - 1, bound: previousUnit.bound })
        const otherUnits = new Set(active.map(unitOf).filter((u) => u !== unit))
        lastUnit.set(unit, { index: claims, bound: [...otherUnits].reduce((sum, u) => sum + weightOf(u), 0), continuous: true })
        claims++
        if (unit !== flow) {
          const index = groupClaims.get(unit) ?? 0
          const previousFlow = lastFlow.get(flow)
          if (previousFlow?.continuous) waits.push({ level: "flow", who: flow, wait: index - previousFlow.index - 1, bound: previousFlow.bound })
          const siblings = active.filter((f) => f !== flow && unitOf(f) === unit)
          lastFlow.set(flow, { index, bound: siblings.reduce((sum, f) => sum + weightOf(f), 0), continuous: true })
          groupClaims.set(unit, index + 1)
        }
      }
    })
    return waits
  })

const tail = { ...seed, admission: "tail" as const, backoffBase: 0, retryBudget: 1_000, leaseTicks: 1_000 }

const shapeArb: fc.Arbitrary<Shape> = fc.record({
  groupOf: fc.array(fc.integer({ min: -1, max: 3 }), { minLength: Flows, maxLength: Flows }),
  flowWeights: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: Flows, maxLength: Flows }),
  groupWeights: fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 4, maxLength: 4 })
})

/** Tenant A (group 0) has flows 0–19, tenant B (group 1) flow 20; the rest are unused. */
const twoTenants: Shape = {
  groupOf: Array.from({ length: Flows }, (_, i) => (i < 20 ? 0 : 1)),
  flowWeights: Array.from({ length: Flows }, () => 1),
  groupWeights: [1, 1, 1, 1]
}

/** Both tenants backlogged: 3 events on each of A's 20 flows and 60 on B's, then 60 steps, all acked. */
const backlog: ReadonlyArray<Op> = [
  ...Array.from({ length: 60 }, (_, i): Op => ({ _tag: "enqueue", flow: i % 20 })),
  ...Array.from({ length: 60 }, (): Op => ({ _tag: "enqueue", flow: 20 })),
  ...Array.from({ length: 60 }, (): Op => ({ _tag: "step", reply: "ack" }))
]

const propertyRuns = { sqlite: 40, postgres: 10 } as const

const suite = (backend: Backend) => {
  const runs = backend.name.startsWith("postgres") ? propertyRuns.postgres : propertyRuns.sqlite
  describe(`tenant fairness (${backend.name})`, () => {
    it.scoped.prop(
      `a continuously eligible group waits at most the other groups' weight, and its flows their siblings' (${runs} runs)`,
      [fc.array(opArb(Flows), { minLength: 20, maxLength: 120 }), shapeArb],
      ([ops, shape]) =>
        Effect.gen(function*() {
          const w = yield* backend.world({ policy: tail })
          const waits = yield* measureWaits(w, ops, shape, true)
          yield* turnEventLoop
          for (const { bound, level, wait, who } of waits) expect(wait, `${level} ${who}`).toBeLessThanOrEqual(bound)
        }),
      { fastCheck: { numRuns: runs }, timeout: runs * 10_000 }
    )

    it.scoped("control: the same measure fails when the enqueues leave the groups out", () =>
      Effect.gen(function*() {
        const grouped = yield* measureWaits(yield* backend.world({ policy: tail }), backlog, twoTenants, true)
        const flat = yield* measureWaits(yield* backend.world({ policy: tail }), backlog, twoTenants, false)
        expect(grouped.filter((w) => w.level === "group" && w.wait > w.bound)).toEqual([])
        expect(flat.some((w) => w.level === "group" && w.wait > w.bound)).toBe(true)
      }))

    it.scoped("tenant A with 20 flows and tenant B with 1, both backlogged: B gets every other claim (without groups, 1 in 21)", () =>
      Effect.gen(function*() {
        const orderOf = (grouped: boolean) =>
          Effect.gen(function*() {
            const w = yield* backend.world({ policy: tail })
            for (let i = 0; i < 40; i++) {
              const flowId = `a${i % 20}`
              yield* w.queue.enqueue({ eventId: `A-${i}`, flowId, body: { delta: 1 }, ...(grouped ? { group: "A" } : {}) })
            }
            for (let i = 0; i < 40; i++) yield* w.queue.enqueue({ eventId: `B-${i}`, flowId: "b", body: { delta: 1 }, ...(grouped ? { group: "B" } : {}) })
            const order: Array<string> = []
            for (let i = 0; i < 42; i++) order.push((yield* w.step)!.eventId[0]!)
            return order.join("")
          })
        expect(yield* orderOf(true)).toBe("AB".repeat(21))
        const flat = yield* orderOf(false)
        expect(flat.split("").filter((t) => t === "B").length).toBe(2)
      }))
  })
}

for (const backend of backends) suite(backend)
describeSkipped(suite)
