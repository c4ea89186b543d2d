/**
 * `Operations.settledCandidates` and `candidatesAfterSettle`: a claim after a settle in one
 * transaction may choose from a walk made before the settle's writes (PostgreSQL sends it with the
 * settle's read). Random stores of flows of no group (turns, heads eligible or not), a random
 * settle (acks with or without a next event, retries with a backoff, stale items that change
 * nothing) and random limits: the candidates made from the earlier walk are exactly those of a walk
 * after the settle — the first `limit` flows of no group whose head is eligible, in turn order —
 * and the groups' part is kept as walked.
 */
import { describe, expect, it } from "@effect/vitest"
import { FastCheck as fc } from "effect"
import { GroupId } from "../../src/domain/Ids.js"
import { candidatesAfterSettle, settledCandidates } from "../../src/domain/Operations.js"
import type { Candidate, Head } from "../../src/domain/Operations.js"
import { compareTurn } from "../../src/domain/Protocol.js"
import type { EventRecord, FlowRecord } from "../../src/domain/Records.js"
import { eid, fid, flowRecord, readyEvent } from "./fixtures.js"

/** A flow of no group: its turn and its head's `nextAt` (null: no head). */
interface FlowSpec {
  readonly served: number
  readonly headAt: number | null
}

/** What the settle does to a flow: ack its head (the next event due at `nextAt`, or none), or retry it at `nextAt`. */
type SettleSpec =
  | { readonly kind: "ack"; readonly nextAt: number | null }
  | { readonly kind: "retry"; readonly nextAt: number }

interface Case {
  readonly flows: ReadonlyArray<FlowSpec>
  /** The flows the settle changes (indexes into `flows`, each with a head), and what it does. */
  readonly settle: ReadonlyArray<readonly [number, SettleSpec]>
  /** Items of the settle that change nothing (stale tokens): the walk reads that much deeper for them too. */
  readonly stale: number
  readonly now: number
  readonly limit: number
}

const at = fc.integer({ min: 0, max: 30 })

const caseArb: fc.Arbitrary<Case> = fc.array(fc.record({ served: fc.integer({ min: 0, max: 6 }), headAt: fc.option(at, { nil: null }) }), {
  minLength: 1,
  maxLength: 24
}).chain((flows) => {
  const withHead = flows.flatMap((f, i) => (f.headAt === null ? [] : [i]))
  const settleSpec: fc.Arbitrary<SettleSpec> = fc.oneof(
    fc.record({ kind: fc.constant("ack" as const), nextAt: fc.option(at, { nil: null }) }),
    fc.record({ kind: fc.constant("retry" as const), nextAt: at })
  )
  return fc.record({
    flows: fc.constant(flows),
    settle: withHead.length === 0
      ? fc.constant([])
      : fc.uniqueArray(fc.constantFrom(...withHead), { maxLength: 4 }).chain((picked) =>
        fc.tuple(...picked.map((i) => settleSpec.map((spec) => [i, spec] as const)))
      ),
    stale: fc.integer({ min: 0, max: 2 }),
    now: at,
    limit: fc.integer({ min: 1, max: 10 })
  })
})

const flowId = (i: number) => `f${String(i).padStart(2, "0")}`
const headEvent = (i: number, seq: number, nextAt: number): EventRecord =>
  readyEvent({ eventId: eid(`${flowId(i)}-${seq}`), flowId: fid(flowId(i)), seq, nextAt })

/** The store before the settle: each flow at seq 2 with its head at seq 1 (if any). */
const before = (flows: ReadonlyArray<FlowSpec>) =>
  flows.map((f, i) => ({
    flow: flowRecord(flowId(i), f.served, { seq: 2, headSeq: f.headAt === null ? null : 1, eligibleAt: f.headAt }),
    head: f.headAt === null ? undefined : headEvent(i, 1, f.headAt)
  }))

/** What a walk at `now` finds: flows whose head is eligible, in turn order, the first `limit`. */
const walk = (store: ReadonlyArray<{ readonly flow: FlowRecord; readonly head: EventRecord | undefined }>, now: number, limit: number) =>
  store
    .flatMap(({ flow, head }) => (head !== undefined && flow.eligibleAt !== null && flow.eligibleAt <= now ? [{ flow, head }] : []))
    .sort((a, b) => compareTurn(a.flow, b.flow))
    .slice(0, limit)

/** The settle as `Operations.settleChanges` reports it: its heads, and its changed events with the events after them. */
const settled = (c: Case) => {
  const heads: Array<Head> = []
  const changed: Array<EventRecord> = []
  const successors: Array<EventRecord> = []
  const after = before(c.flows).map((entry) => ({ ...entry }))
  for (const [i, spec] of c.settle) {
    const head = after[i]!.head!
    if (spec.kind === "retry") {
      const retried = { ...head, nextAt: spec.nextAt, attempts: head.attempts + 1 }
      changed.push(retried)
      heads.push({ flowId: fid(flowId(i)), headSeq: 1, eligibleAt: spec.nextAt })
      after[i] = { flow: { ...after[i]!.flow, eligibleAt: spec.nextAt }, head: retried }
    } else {
      changed.push({ ...head, state: "acked" })
      const next = spec.nextAt === null ? undefined : headEvent(i, 2, spec.nextAt)
      if (next !== undefined) successors.push(next)
      heads.push({ flowId: fid(flowId(i)), headSeq: next === undefined ? null : 2, eligibleAt: next?.nextAt ?? null })
      after[i] = { flow: { ...after[i]!.flow, headSeq: next === undefined ? null : 2, eligibleAt: next?.nextAt ?? null }, head: next }
    }
  }
  return { heads, events: [...successors, ...changed], after }
}

const groupedPart: ReadonlyArray<Candidate> = [0, 1].map((i) => {
  const group = { groupId: GroupId.make(`g${i}`), served: i, weight: 1, burst: 0 }
  return {
    flow: flowRecord(`g${i}-f`, 0, { group: group.groupId }),
    head: readyEvent({ eventId: eid(`g${i}-f-1`), flowId: fid(`g${i}-f`) }),
    group
  }
})

const summary = (candidates: ReadonlyArray<Candidate>) =>
  candidates.map(({ flow, group, head }) => ({ flow, head: head.eventId, state: head.state, nextAt: head.nextAt, group: group?.groupId }))

describe("a claim's candidates from a walk made before the settle", () => {
  it("are those of a walk after it: 3,000 random stores and settles", () => {
    let changedSome = 0
    fc.assert(
      fc.property(caseArb, (c) => {
        const store = before(c.flows)
        const walked = [...walk(store, c.now, c.limit + c.settle.length + c.stale), ...groupedPart]
        const { after, events, heads } = settled(c)
        const flows = new Map(store.map(({ flow }) => [flow.flowId as string, flow]))
        const touched = settledCandidates(heads, events, flows, c.now)
        expect(touched).toBeDefined()
        const expected = [...walk(after, c.now, c.limit), ...groupedPart]
        const actual = candidatesAfterSettle(walked, touched!, c.limit)
        expect(summary(actual)).toEqual(summary(expected))
        if (summary(walk(store, c.now, c.limit)).join() !== summary(walk(after, c.now, c.limit)).join()) changedSome++
      }),
      { numRuns: 3_000 }
    )
    // The settles changed what a claim chooses from often enough for the comparison to mean something.
    expect(changedSome).toBeGreaterThan(300)
  })

  it("needs the walk deeper by what the settle changed: a flow it leaves ineligible would hide the next one", () => {
    // a (served 0) is settled and retried later; b (served 1) is the next in turn.
    const c: Case = { flows: [{ served: 0, headAt: 0 }, { served: 1, headAt: 0 }], settle: [[0, { kind: "retry", nextAt: 10 }]], stale: 0, now: 5, limit: 1 }
    const store = before(c.flows)
    const { events, heads } = settled(c)
    const touched = settledCandidates(heads, events, new Map(store.map(({ flow }) => [flow.flowId as string, flow])), c.now)!
    expect(summary(candidatesAfterSettle(walk(store, c.now, 2), touched, 1)).map((s) => s.flow.flowId)).toEqual(["f01"])
    // Walked only `limit` deep, nothing would be left to claim.
    expect(candidatesAfterSettle(walk(store, c.now, 1), touched, 1)).toEqual([])
  })

  it("are not made when the settle changed a flow of a group, a flow twice, or a flow it did not read", () => {
    const flow = flowRecord("a", 0, { group: GroupId.make("g") })
    const head = readyEvent({ eventId: eid("a-1"), flowId: fid("a") })
    const heads: ReadonlyArray<Head> = [{ flowId: fid("a"), headSeq: 1, eligibleAt: 0 }]
    expect(settledCandidates(heads, [head], new Map([["a", flow]]), 0)).toBeUndefined()
    const alone = { ...flow, group: null }
    expect(settledCandidates([...heads, ...heads], [head], new Map([["a", alone]]), 0)).toBeUndefined()
    expect(settledCandidates(heads, [head], new Map(), 0)).toBeUndefined()
    expect(settledCandidates(heads, [head], new Map([["a", alone]]), 0)?.get("a")?.head).toEqual(head)
  })
})
