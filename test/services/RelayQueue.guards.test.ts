/**
 * Guards: typed errors that change nothing (docs/protocol.md, Scenarios 9–11), bad input, and
 * atomicity under injected database failures (scenarios 19–21).
 */
import { describe, expect, it } from "@effect/vitest"
import Database from "better-sqlite3"
import { Effect, Exit, Ref } from "effect"
import * as path from "node:path"
import { backends, describeSkipped, tempDir } from "../support/backends.js"
import type { Backend } from "../support/backends.js"
import { at, makeWorld as sqliteWorld } from "../support/world.js"
import type { World } from "../support/world.js"

/** Runs `effect`, expects it to fail with `tag`, and checks the queue store did not change. */
const failsUnchanged = <A, E extends { readonly _tag: string }>(w: Pick<World, "queue">, effect: Effect.Effect<A, E>, tag: string) =>
  Effect.gen(function*() {
    const before = yield* w.queue.snapshot
    const exit = yield* Effect.exit(effect)
    expect(exit).toMatchObject({ _tag: "Failure", cause: { _tag: "Fail", error: { _tag: tag } } })
    expect(yield* w.queue.snapshot).toEqual(before)
    return exit
  })

const suite = (backend: Backend) => {
  const makeWorld = backend.world

  const quarantinedA1 = Effect.gen(function*() {
    const w = yield* makeWorld({ maxDelta: 5 })
    yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 10 } })
    yield* w.queue.enqueue({ eventId: "B1", flowId: "B", body: { delta: 1 } })
    expect(yield* w.step).toMatchObject({ eventId: "A1", outcome: { _tag: "Quarantined" } })
    return w
  })

  describe("scenario 9: redrive_guards", () => {
    it.scoped("wrong generation, not quarantined, blank reason and unknown id are typed errors that change nothing", () =>
      Effect.gen(function*() {
        const w = yield* quarantinedA1
        yield* at(3)
        yield* failsUnchanged(w, w.queue.redrive({ eventId: "A1", expectedGeneration: 7, reason: "fix" }), "GenerationMismatch")
        yield* failsUnchanged(w, w.queue.redrive({ eventId: "B1", expectedGeneration: 0, reason: "fix" }), "NotQuarantined")
        yield* failsUnchanged(w, w.queue.redrive({ eventId: "A1", expectedGeneration: 1, reason: "  \t" }), "MissingReason")
        yield* failsUnchanged(w, w.queue.redrive({ eventId: "A1", expectedGeneration: 1, reason: "" }), "MissingReason")
        yield* failsUnchanged(w, w.queue.redrive({ eventId: "nope", expectedGeneration: 1, reason: "fix" }), "EventNotFound")
        expect((yield* w.queue.snapshot).audit).toEqual([])
      }))

    it.scoped("a second redrive based on the same generation loses", () =>
      Effect.gen(function*() {
        const w = yield* quarantinedA1
        expect(yield* w.queue.redrive({ eventId: "A1", expectedGeneration: 1, reason: "first operator" })).toEqual({
          _tag: "Redriven",
          generation: 2
        })
        yield* failsUnchanged(w, w.queue.redrive({ eventId: "A1", expectedGeneration: 1, reason: "second operator" }), "NotQuarantined")
      }))
  })

  describe("scenario 10: enqueue_idempotency", () => {
    it.scoped("the same id, flow and body is Existing; another body or flow is EnqueueConflict; the flow seq never moves", () =>
      Effect.gen(function*() {
        const w = yield* makeWorld()
        expect(yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1, note: "x" } })).toEqual({ _tag: "Enqueued", seq: 1 })
        // Key order does not make another body.
        expect(yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { note: "x", delta: 1 } })).toEqual({ _tag: "Existing", seq: 1 })
        yield* failsUnchanged(w, w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 2, note: "x" } }), "EnqueueConflict")
        yield* failsUnchanged(w, w.queue.enqueue({ eventId: "A1", flowId: "B", body: { delta: 1, note: "x" } }), "EnqueueConflict")
        const snapshot = yield* w.queue.snapshot
        expect(snapshot.flows).toEqual([{ flowId: "A", seq: 1, served: 0, headSeq: 1, eligibleAt: 0, weight: 1, burst: 0, group: null }])
        expect(snapshot.events).toHaveLength(1)
      }))
  })

  describe("scenario 11: clock_regression", () => {
    it.scoped("every write at a tick below the persisted tick is ClockRegressed and changes nothing", () =>
      Effect.gen(function*() {
        const w = yield* makeWorld({ maxDelta: 5 })
        yield* w.queue.enqueue({ eventId: "Q1", flowId: "Q", body: { delta: 10 } })
        yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        expect(yield* w.step).toMatchObject({ eventId: "A1", outcome: { _tag: "Acked" } })
        expect(yield* w.step).toMatchObject({ eventId: "Q1", outcome: { _tag: "Quarantined" } })
        yield* w.queue.enqueue({ eventId: "A2", flowId: "A", body: { delta: 1 } })
        yield* at(10)
        const claimed = yield* w.claim
        expect((yield* w.queue.snapshot).clock.tick).toBe(10)
        yield* at(9)
        yield* failsUnchanged(w, w.queue.enqueue({ eventId: "A3", flowId: "A", body: { delta: 1 } }), "ClockRegressed")
        yield* failsUnchanged(w, w.queue.claim, "ClockRegressed")
        yield* failsUnchanged(w, w.queue.settle(claimed.token, { _tag: "Accepted" }), "ClockRegressed")
        yield* failsUnchanged(w, w.queue.redrive({ eventId: "Q1", expectedGeneration: 1, reason: "fix" }), "ClockRegressed")
        yield* at(10)
        expect(yield* w.queue.settle(claimed.token, { _tag: "Accepted" })).toEqual({ _tag: "Acked" })
      }))
  })

  describe("bad input", () => {
    const ids: ReadonlyArray<readonly [string, unknown]> = [
      ["an empty id", ""],
      ["a blank id", "   "],
      ["an id over 200 characters", "x".repeat(201)],
      ["an id with a newline", "A\n1"],
      ["an id with a NUL", "A\u00001"],
      ["a number as id", 42],
      ["a missing id", undefined]
    ]
    for (const [what, id] of ids) {
      it.scoped(`enqueue refuses ${what} as event id and as flow id`, () =>
        Effect.gen(function*() {
          const w = yield* makeWorld()
          yield* failsUnchanged(w, w.queue.enqueue({ eventId: id as string, flowId: "A", body: {} }), "InvalidInput")
          yield* failsUnchanged(w, w.queue.enqueue({ eventId: "A1", flowId: id as string, body: {} }), "InvalidInput")
        }))
    }

    const cyclic: Record<string, unknown> = { delta: 1 }
    cyclic.self = cyclic
    const bodies: ReadonlyArray<readonly [string, unknown]> = [
      ["a function", () => 1],
      ["NaN", { delta: Number.NaN }],
      ["Infinity", { delta: Number.POSITIVE_INFINITY }],
      ["a cycle", cyclic],
      ["undefined", undefined],
      ["a nested undefined", { delta: 1, extra: undefined }],
      ["a bigint", { delta: 1n }],
      ["a Date", { at: new Date(0) }]
    ]
    for (const [what, body] of bodies) {
      it.scoped(`enqueue refuses a body holding ${what}`, () =>
        Effect.gen(function*() {
          const w = yield* makeWorld()
          yield* failsUnchanged(w, w.queue.enqueue({ eventId: "A1", flowId: "A", body }), "InvalidInput")
        }))
    }

    it.scoped("enqueue refuses a body over the configured size limit and accepts one at the limit", () =>
      Effect.gen(function*() {
        const w = yield* makeWorld({ policy: { maxBodyBytes: 64 } })
        const atLimit = { s: "y".repeat(64 - `{"s":""}`.length) }
        yield* failsUnchanged(w, w.queue.enqueue({ eventId: "A1", flowId: "A", body: { s: "y".repeat(64) } }), "InvalidInput")
        expect(yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: atLimit })).toEqual({ _tag: "Enqueued", seq: 1 })
      }))

    it.scoped("the default size limit is 1 MiB", () =>
      Effect.gen(function*() {
        const w = yield* makeWorld()
        yield* failsUnchanged(w, w.queue.enqueue({ eventId: "A1", flowId: "A", body: "z".repeat(1024 * 1024) }), "InvalidInput")
      }))

    it.scoped("a settle token for an unknown event is Stale", () =>
      Effect.gen(function*() {
        const w = yield* makeWorld()
        const before = yield* w.queue.snapshot
        expect(yield* w.queue.settle({ eventId: "ghost", generation: 1 }, { _tag: "Accepted" })).toEqual({ _tag: "Stale" })
        expect((yield* w.queue.snapshot).events).toEqual(before.events)
      }))

    it.scoped("a reply with an unknown tag or malformed fields is InvalidInput and settles nothing", () =>
      Effect.gen(function*() {
        const w = yield* makeWorld()
        yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        const claimed = yield* w.claim
        const settle = (reply: unknown) => w.queue.settle(claimed.token, reply as never)
        yield* failsUnchanged(w, settle({ _tag: "Success" }), "InvalidInput")
        yield* failsUnchanged(w, settle({ _tag: "Retry" }), "InvalidInput")
        yield* failsUnchanged(w, settle({ _tag: "Gap", expected: "2" }), "InvalidInput")
        yield* failsUnchanged(w, settle(null), "InvalidInput")
        yield* failsUnchanged(w, w.queue.settle({ eventId: "A1", generation: -1 }, { _tag: "Accepted" }), "InvalidInput")
        expect(yield* settle({ _tag: "Accepted" })).toEqual({ _tag: "Acked" })
      }))

    it.scoped("a policy with a zero lease or budget is refused when the layer opens", () =>
      Effect.gen(function*() {
        const exit = yield* Effect.exit(makeWorld({ policy: { leaseTicks: 0 } }))
        expect(exit).toMatchObject({ _tag: "Failure", cause: { error: { _tag: "InvalidInput" } } })
        const exit2 = yield* Effect.exit(makeWorld({ policy: { retryBudget: 1.5 } }))
        expect(exit2).toMatchObject({ _tag: "Failure", cause: { error: { _tag: "InvalidInput" } } })
      }))
  })

  const sqlFailure = { _tag: "Failure", cause: { _tag: "Fail", error: { _tag: "SqlError" } } }

  describe("scenarios 19-21: atomicity under database failures", () => {
    it.scoped("atomic_enqueue: a rejected event insert leaves the flow seq unchanged", () =>
      Effect.gen(function*() {
        const w = yield* makeWorld()
        yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })
        yield* w.rejectInserts("queue", "relay_event")
        const before = yield* w.queue.snapshot
        expect(yield* Effect.exit(w.queue.enqueue({ eventId: "A2", flowId: "A", body: { delta: 1 } }))).toMatchObject(sqlFailure)
        expect(yield* Effect.exit(w.queue.enqueue({ eventId: "B1", flowId: "B", body: { delta: 1 } }))).toMatchObject(sqlFailure)
        expect(yield* w.queue.snapshot).toEqual(before)
        expect(before.flows).toEqual([{ flowId: "A", seq: 1, served: 0, headSeq: 1, eligibleAt: 0, weight: 1, burst: 0, group: null }])
      }))

    it.scoped("atomic_receive: a rejected projection write leaves no receipt and no progress", () =>
      Effect.gen(function*() {
        const w = yield* makeWorld()
        yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 3 } })
        yield* w.rejectInserts("inbox", "counter_total")
        const claimed = yield* w.claim
        expect(yield* Effect.exit(w.deliver(claimed))).toMatchObject(sqlFailure)
        expect(yield* w.inbox.receipts).toEqual([])
        expect(yield* w.inbox.progress).toEqual(new Map())
        expect(yield* w.totals).toEqual(new Map())
        // The event is untouched: still inflight under its claim, to be re-sent after the lease.
        expect((yield* w.queue.snapshot).events[0]).toMatchObject({ state: "inflight", generation: 1 })
      }))

    it.scoped("atomic_redrive: a rejected audit insert leaves the event quarantined", () =>
      Effect.gen(function*() {
        const w = yield* makeWorld({ maxDelta: 5 })
        yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 10 } })
        expect(yield* w.step).toMatchObject({ outcome: { _tag: "Quarantined" } })
        yield* w.rejectInserts("queue", "relay_audit")
        yield* Ref.set(w.maxDelta, 1000)
        const before = yield* w.queue.snapshot
        yield* at(4)
        expect(yield* Effect.exit(w.queue.redrive({ eventId: "A1", expectedGeneration: 1, reason: "fix" }))).toMatchObject(sqlFailure)
        expect(yield* w.queue.snapshot).toEqual(before)
        expect(before.events[0]).toMatchObject({ state: "quarantined", generation: 1, reason: "unsupported_delta" })
        expect(yield* w.queue.claim).toEqual({ _tag: "Idle" })
      }))
  })

}

for (const backend of backends) describe(backend.name, () => suite(backend))
describeSkipped(suite)

describe("two stores in one program", () => {
  it.scoped("a queue file and a receiver file are separate databases with their own clients", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const queueFile = path.join(dir, "queue.db")
      const inboxFile = path.join(dir, "inbox.db")
      const w = yield* sqliteWorld({ queueFile, inboxFile })
      yield* w.queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 2 } })
      expect(yield* w.step).toMatchObject({ eventId: "A1", outcome: { _tag: "Acked" } })
      const tables = (file: string) =>
        new Database(file, { readonly: true }).prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").all()
          .map((row) => (row as { name: string }).name)
      expect(tables(queueFile)).toEqual(expect.arrayContaining(["relay_clock", "relay_event", "relay_flow", "relay_audit"]))
      expect(tables(queueFile)).not.toContain("inbox_receipt")
      expect(tables(inboxFile)).toEqual(expect.arrayContaining(["inbox_receipt", "inbox_progress", "counter_total"]))
      expect(tables(inboxFile)).not.toContain("relay_event")
      expect(Exit.isSuccess(yield* Effect.exit(w.totals))).toBe(true)
    }))
})
