/**
 * `Operations.rotationComplete`: a claim of n that read only each group's first k flows (in turn
 * order) keeps what it took when the check says so — the rotation over the truncated candidates
 * takes exactly the turns it takes over every eligible head. Random stores of groups (random
 * sizes, weights, bursts and turns) and flows of no group; random n and k.
 */
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { GroupId } from "../../src/domain/Ids.js"
import { rotate, rotationComplete } from "../../src/domain/Operations.js"
import type { Candidate } from "../../src/domain/Operations.js"
import { compareTurn } from "../../src/domain/Protocol.js"
import { eid, fid, flowRecord, readyEvent } from "./fixtures.js"

interface GroupSpec {
  /** Each flow's `served`. */
  readonly flows: ReadonlyArray<number>
  readonly served: number
  readonly weight: number
  readonly burst: number
}

interface StoreSpec {
  readonly groups: ReadonlyArray<GroupSpec>
  /** Each flow of no group's `served`. */
  readonly alone: ReadonlyArray<number>
  readonly limit: number
  readonly perGroup: number
}

const groupArb: fc.Arbitrary<GroupSpec> = fc.integer({ min: 1, max: 4 }).chain((weight) =>
  fc.record({
    flows: fc.array(fc.integer({ min: 0, max: 40 }), { minLength: 1, maxLength: 14 }),
    served: fc.integer({ min: 0, max: 40 }),
    weight: fc.constant(weight),
    burst: fc.integer({ min: 0, max: weight - 1 })
  })
)

const storeArb: fc.Arbitrary<StoreSpec> = fc.record({
  groups: fc.array(groupArb, { maxLength: 6 }),
  alone: fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 6 }),
  limit: fc.integer({ min: 1, max: 40 }),
  perGroup: fc.integer({ min: 1, max: 10 })
})

const candidatesOf = ({ alone, groups }: StoreSpec): ReadonlyArray<Candidate> => {
  const candidates: Array<Candidate> = []
  const head = (flowId: string) => readyEvent({ eventId: eid(`${flowId}-1`), flowId: fid(flowId) })
  alone.forEach((served, i) => candidates.push({ flow: flowRecord(`a${i}`, served), head: head(`a${i}`) }))
  groups.forEach(({ burst, flows, served, weight }, g) => {
    const group = { groupId: GroupId.make(`g${g}`), served, weight, burst }
    flows.forEach((flowServed, i) =>
      candidates.push({ flow: flowRecord(`g${g}-f${i}`, flowServed, { group: group.groupId }), head: head(`g${g}-f${i}`), group })
    )
  })
  return candidates
}

/** Each group's first `perGroup` flows in turn order; flows of no group all kept. */
const truncated = (candidates: ReadonlyArray<Candidate>, perGroup: number): ReadonlyArray<Candidate> => {
  const byGroup = new Map<string, Array<Candidate>>()
  const kept: Array<Candidate> = []
  for (const candidate of candidates) {
    if (candidate.group === undefined) kept.push(candidate)
    else byGroup.set(candidate.group.groupId, [...(byGroup.get(candidate.group.groupId) ?? []), candidate])
  }
  for (const flows of byGroup.values()) kept.push(...[...flows].sort((a, b) => compareTurn(a.flow, b.flow)).slice(0, perGroup))
  return kept
}

const taken = (candidates: ReadonlyArray<Candidate>, limit: number) =>
  rotate(candidates, limit, 1_000).map(({ candidate, ticket }) => [candidate.flow.flowId, ticket])

describe("Operations.rotationComplete", () => {
  it("when it holds, the rotation over each group's first flows takes what it takes over all of them", () => {
    let held = 0
    let refused = 0
    fc.assert(
      fc.property(storeArb, (store) => {
        const all = candidatesOf(store)
        const first = truncated(all, store.perGroup)
        if (!rotationComplete(first, store.limit, store.perGroup)) {
          refused++
          return
        }
        held++
        expect(taken(first, store.limit)).toEqual(taken(all, store.limit))
      }),
      { numRuns: 3_000 }
    )
    // Both answers occur: the property is not vacuous, and the check does refuse.
    expect(held).toBeGreaterThan(300)
    expect(refused).toBeGreaterThan(300)
  })

  it("holds whenever every group offered all its flows", () => {
    fc.assert(
      fc.property(storeArb, (store) => {
        const all = candidatesOf(store)
        const largest = Math.max(0, ...store.groups.map((group) => group.flows.length))
        expect(rotationComplete(all, store.limit, largest + 1)).toBe(true)
      }),
      { numRuns: 500 }
    )
  })
})
