/**
 * Small builders shared by the pure domain tests (no database).
 */
import { Either } from "effect"
import { EventId, FlowId } from "../../src/domain/Ids.js"
import type { EventRecord, FlowRecord } from "../../src/domain/Records.js"

export const eid = (s: string): EventId => EventId.make(s)
export const fid = (s: string): FlowId => FlowId.make(s)

/** A freshly enqueued event (docs/protocol.md, Enqueue: ready at now, generation 0, no attempts). */
export const readyEvent = (overrides: Partial<EventRecord> = {}): EventRecord => ({
  eventId: eid("A1"),
  flowId: fid("A"),
  seq: 1,
  body: { delta: 1 },
  state: "ready",
  nextAt: 0,
  leaseUntil: null,
  generation: 0,
  attempts: 0,
  lifetimeAttempts: 0,
  reason: null,
  ...overrides
})

/** A flow row (new flows start with served = 0). */
export const flowRecord = (flowId: string, served: number, overrides: Partial<FlowRecord> = {}): FlowRecord => ({
  flowId: fid(flowId),
  seq: 1,
  served,
  headSeq: 1,
  eligibleAt: 0,
  weight: 1,
  burst: 0,
  group: null,
  ...overrides
})

export const rightOf = <A, E>(e: Either.Either<A, E>): A => {
  if (Either.isLeft(e)) throw new Error(`expected Right, got Left: ${String(e.left)}`)
  return e.right
}

export const leftOf = <A, E>(e: Either.Either<A, E>): E => {
  if (Either.isRight(e)) throw new Error(`expected Left, got Right: ${JSON.stringify(e.right)}`)
  return e.left
}

/** A deep copy for checking that pure functions leave their inputs alone. */
export const snapshotOf = <A>(a: A): A => structuredClone(a)
