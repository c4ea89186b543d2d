/**
 * The receiver: `receiveBatch` answers what `receive` would, one delivery after another, in one
 * transaction; a refusal inside a batch rolls back only its own writes; a stored id is compared
 * with its delivery by flow, seq and body as the store kept them. Once per receiver store
 * (SQLite, PostgreSQL: `receiverBackends`), not once per queue backend.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import type { DeliveryInput } from "../../src/domain/Records.js"
import { describeSkipped, receiverBackends } from "../support/backends.js"
import type { Backend } from "../support/backends.js"

const deliveries: ReadonlyArray<DeliveryInput> = [
  { eventId: "A1", flowId: "A", seq: 1, body: { delta: 2 } },
  { eventId: "B1", flowId: "B", seq: 1, body: { delta: 900 } }, // above the limit: Rejected
  { eventId: "A1", flowId: "A", seq: 1, body: { delta: 2 } }, // the same again: Duplicate
  { eventId: "A3", flowId: "A", seq: 3, body: { delta: 1 } }, // ahead: Gap{expected: 2}
  { eventId: "A2", flowId: "A", seq: 2, body: { delta: 3 } },
  { eventId: "X9", flowId: "A", seq: 2, body: { delta: 3 } }, // seq taken by A2: SequenceConflict
  { eventId: "A2", flowId: "B", seq: 1, body: { delta: 3 } }, // id taken with another flow: IdConflict
  { eventId: "B1", flowId: "B", seq: 1, body: { delta: 4 } }
]

const suite = (backend: Backend) => {
  it.scoped("receiveBatch gives the replies and the state that receive gives one by one", () =>
    Effect.gen(function*() {
      const one = yield* backend.world({ maxDelta: 500 })
      const many = yield* backend.world({ maxDelta: 500 })
      const single = yield* Effect.forEach(deliveries, (d) => one.inbox.receive(d))
      const batch = yield* many.inbox.receiveBatch(deliveries)
      expect(batch).toEqual(single)
      expect(batch.map((r) => r._tag)).toEqual([
        "Accepted", "Rejected", "Duplicate", "Gap", "Accepted", "SequenceConflict", "IdConflict", "Accepted"
      ])
      expect(yield* many.inbox.receipts).toEqual(yield* one.inbox.receipts)
      expect(yield* many.inbox.progress).toEqual(new Map([["A", 2], ["B", 1]]))
      expect(yield* many.totals).toEqual(new Map([["A", 5], ["B", 4]]))
    }))

  it.scoped("a stored id redelivered with the same flow and seq but another body is IdConflict and changes nothing", () =>
    Effect.gen(function*() {
      const w = yield* backend.world({ maxDelta: 500 })
      const first = { eventId: "A1", flowId: "A", seq: 1, body: { delta: 2, note: "x" } }
      expect(yield* w.inbox.receive(first)).toEqual({ _tag: "Accepted" })
      const receipts = yield* w.inbox.receipts
      // The same body with its keys in another order is the same body.
      expect(yield* w.inbox.receive({ ...first, body: { note: "x", delta: 2 } })).toEqual({ _tag: "Duplicate" })
      // Read back from the store (a fresh receive, then a batch): only the body differs.
      expect(yield* w.inbox.receive({ ...first, body: { delta: 3, note: "x" } })).toEqual({ _tag: "IdConflict" })
      expect(yield* w.inbox.receiveBatch([{ ...first, body: { delta: 2 } }, { ...first, body: { delta: 2, note: "y" } }]))
        .toEqual([{ _tag: "IdConflict" }, { _tag: "IdConflict" }])
      expect(yield* w.inbox.receipts).toEqual(receipts)
      expect(yield* w.inbox.progress).toEqual(new Map([["A", 1]]))
      expect(yield* w.totals).toEqual(new Map([["A", 2]]))
    }))

  it.scoped("an invalid delivery refuses the whole batch and stores nothing", () =>
    Effect.gen(function*() {
      const w = yield* backend.world()
      const exit = yield* Effect.exit(w.inbox.receiveBatch([deliveries[0]!, { eventId: "", flowId: "A", seq: 2, body: {} }]))
      expect(exit).toMatchObject({ _tag: "Failure", cause: { error: { _tag: "InvalidInput" } } })
      expect(yield* w.inbox.receipts).toEqual([])
    }))
}

for (const backend of receiverBackends) describe(backend.name, () => suite(backend))
describeSkipped(suite, ["postgres"])
