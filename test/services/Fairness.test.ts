/**
 * Fairness beyond the seed: with `admission: "tail"`, arrivals never overtake a waiting flow, so
 * every continuously eligible flow waits a bounded number of claims; weights give shares. Runs on
 * every configured backend (SQLite always, PostgreSQL when FAIR_RELAY_PG_URL is set; reported as
 * skipped by name otherwise), each world in fresh stores.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, FastCheck as fc } from "effect"
import { seedPolicy as seed } from "../../src/domain/Policy.js"
import { backends, describeSkipped } from "../support/backends.js"
import type { Backend } from "../support/backends.js"
import { activeFlows, eligibleFlows, type Op, opArb, runOps, turnEventLoop } from "../support/fairness.js"
import type { World } from "../support/world.js"

// Every world passes the article's preset (seed admission, logical ticks) or an explicit variant of
// it: these tests must not depend on the library's defaults (production values, tail admission).

/**
 * Runs `ops` and measures, for every claim of a flow F that stayed eligible since its previous
 * claim, the claims of other flows in between; returns them with the bound for each: the total
 * weight of the other flows that had unacked events when F was last claimed.
 */
const measureWaits = (w: World, ops: ReadonlyArray<Op>, weights: ReadonlyMap<string, number>) =>
  Effect.gen(function*() {
    const waits: Array<{ readonly flow: string; readonly wait: number; readonly bound: number }> = []
    const last = new Map<string, { index: number; bound: number; continuous: boolean }>()
    let claims = 0
    yield* runOps(w, ops, {
      arrival: (flowId) => ({ weight: weights.get(flowId) ?? 1 }),
      // A flow that stops being eligible at any moment (drained, in backoff, quarantined) starts over.
      observe: (snapshot) => {
        const eligible = eligibleFlows(snapshot)
        for (const [flow, state] of last) if (!eligible.has(flow)) state.continuous = false
      },
      claimed: (flow, before) => {
        const previous = last.get(flow)
        if (previous?.continuous) waits.push({ flow, wait: claims - previous.index - 1, bound: previous.bound })
        const others = [...activeFlows(before)].filter((f) => f !== flow)
        last.set(flow, { index: claims, bound: others.reduce((sum, f) => sum + (weights.get(f) ?? 1), 0), continuous: true })
        claims++
      }
    })
    return waits
  })

/**
 * Property runs per backend: fewer on PostgreSQL, where each run opens two fresh schemas and every
 * step is a few round trips, to stay within about a minute of CI.
 */
const propertyRuns = { sqlite: 40, postgres: 15 } as const

/** The property runs on `backend`: PostgreSQL's in both claim modes (postgres, postgres-parallel). */
const runsOn = (backend: string) => backend.startsWith("postgres") ? propertyRuns.postgres : propertyRuns.sqlite

/** The fast-check runs of a property on `backend`, and a timeout that fits them. */
const propertyOptions = (backend: string) => {
  const numRuns = runsOn(backend)
  return { fastCheck: { numRuns }, timeout: numRuns * 10_000 }
}

const suite = (backend: Backend) => {
  const runs = runsOn(backend.name)
  describe(`tail admission (${backend.name})`, () => {
    it.scoped.prop(
      `no continuously eligible flow waits more claims than the other flows' total weight at its last claim (${runs} runs)`,
      [fc.array(opArb(31), { minLength: 20, maxLength: 120 }), fc.array(fc.integer({ min: 1, max: 3 }), { minLength: 31, maxLength: 31 })],
      ([ops, weightList]) =>
        Effect.gen(function*() {
          const weights = new Map(weightList.map((weight, i) => [`f${i}`, weight]))
          const w = yield* backend.world({ policy: { ...seed, admission: "tail", backoffBase: 0, retryBudget: 1_000, leaseTicks: 1_000 } })
          const waits = yield* measureWaits(w, ops, weights)
          yield* turnEventLoop
          for (const { bound, flow, wait } of waits) expect(wait, `flow ${flow}`).toBeLessThanOrEqual(bound)
        }),
      propertyOptions(backend.name)
    )

    it.scoped("arrivals go behind a waiting flow: the scenario-12 workload dispatches A1 A2 B1 C1 D1", () =>
      Effect.gen(function*() {
        const w = yield* backend.world({ policy: { ...seed, admission: "tail" } })
        yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        yield* w.queue.enqueue({ eventId: "A2", flowId: "A", body: { delta: 1 } })
        const order = [(yield* w.step)!.eventId]
        for (const flow of ["B", "C", "D"]) {
          yield* w.queue.enqueue({ eventId: `${flow}1`, flowId: flow, body: { delta: 1 } })
          order.push((yield* w.step)!.eventId)
        }
        order.push((yield* w.step)!.eventId)
        expect(order).toEqual(["A1", "A2", "B1", "C1", "D1"])
      }))

    it.scoped("under seed admission a stream of new flows overtakes an old flow as long as it lasts", () =>
      Effect.gen(function*() {
        const w = yield* backend.world({ policy: seed })
        yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        yield* w.queue.enqueue({ eventId: "A2", flowId: "A", body: { delta: 1 } })
        expect((yield* w.step)!.eventId).toBe("A1")
        for (let i = 0; i < 50; i++) {
          yield* w.queue.enqueue({ eventId: `N${i}`, flowId: `N${i}`, body: { delta: 1 } })
          expect((yield* w.step)!.eventId).toBe(`N${i}`)
        }
        expect((yield* w.step)!.eventId).toBe("A2")
      }))
  })

  describe(`weights (${backend.name})`, () => {
    it.scoped.prop(
      `over every round a flow of weight w gets w opportunities for each one of a weight-1 flow (±1) (${runs} runs)`,
      [fc.array(fc.integer({ min: 1, max: 5 }), { minLength: 2, maxLength: 6 }), fc.integer({ min: 2, max: 6 })],
      ([weightList, rounds]) =>
        Effect.gen(function*() {
          const w = yield* backend.world({ policy: seed })
          const flows = weightList.map((weight, i) => ({ flowId: `w${i}`, weight }))
          const roundLength = weightList.reduce((a, b) => a + b, 0)
          for (const { flowId, weight } of flows) {
            for (let i = 0; i < weight * rounds + 1; i++) {
              yield* w.queue.enqueue({ eventId: `${flowId}-${i}`, flowId, body: { delta: 1 }, ...(i === 0 ? { weight } : {}) })
            }
          }
          for (let round = 0; round < rounds; round++) {
            yield* turnEventLoop
            const counts = new Map<string, number>()
            for (let i = 0; i < roundLength; i++) {
              const step = yield* w.step
              counts.set(step!.eventId.split("-")[0]!, (counts.get(step!.eventId.split("-")[0]!) ?? 0) + 1)
            }
            for (const { flowId, weight } of flows) {
              expect(Math.abs((counts.get(flowId) ?? 0) - weight), `round ${round} ${flowId}`).toBeLessThanOrEqual(1)
            }
          }
        }),
      propertyOptions(backend.name)
    )

    it.scoped("setFlowWeight changes a flow's share and refuses weights outside 1..1000000", () =>
      Effect.gen(function*() {
        const w = yield* backend.world({ policy: seed })
        for (const flow of ["A", "B"]) {
          for (let i = 0; i < 6; i++) yield* w.queue.enqueue({ eventId: `${flow}${i}`, flowId: flow, body: { delta: 1 } })
        }
        yield* w.queue.setFlowWeight({ flowId: "A", weight: 2 })
        const order: Array<string> = []
        for (let i = 0; i < 6; i++) order.push((yield* w.step)!.eventId[0]!)
        expect(order.join("")).toBe("AABAAB")
        for (const weight of [0, -1, 1.5, 1_000_001]) {
          const exit = yield* Effect.exit(w.queue.setFlowWeight({ flowId: "A", weight }))
          expect(exit).toMatchObject({ _tag: "Failure", cause: { error: { _tag: "InvalidInput" } } })
        }
        expect((yield* w.queue.snapshot).flows.find((f) => f.flowId === "A")?.weight).toBe(2)
      }))
  })
}

for (const backend of backends) suite(backend)
describeSkipped(suite)
