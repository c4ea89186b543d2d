/**
 * The whole path over a real loopback socket: a SQLite queue, a `Relay` with the HTTP transport
 * (Node's undici client), and a SQLite receiver behind `HttpInbox` on a Node HTTP server.
 * Time is the live clock (ticks are milliseconds), so the lease is set far above an exchange.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { describe, expect, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Layer, Ref, Schedule } from "effect"
import * as HttpInbox from "../../src/http/HttpInbox.js"
import * as HttpTransport from "../../src/http/HttpTransport.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import * as Counter from "../../src/sample/Counter.js"
import { Inbox } from "../../src/services/Inbox.js"
import { Relay } from "../../src/services/Relay.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import type { RelayPolicy } from "../../src/domain/Policy.js"
import * as Receiver from "./receiver.js"
import { TestSecret } from "./signing.js"

const flows = ["A", "B", "C", "D", "E"] as const
const perFlow = 6
const deltaOf = (flow: number, seq: number) => 1 + ((flow * 7 + seq * 3) % 10)

/** Everything of one run: the receiver (server + inbox), the queue, the relay on HTTP. */
const system = (maxDelta: Ref.Ref<number>, policy: Partial<RelayPolicy>) => {
  const receiver = Receiver.layer(maxDelta)
  const transport = Layer.unwrapEffect(
    Effect.map(HttpInbox.url, (base) => HttpTransport.layer({ url: new URL("deliveries", base).href, secrets: TestSecret, timeout: "5 seconds" }))
  )
  const queue = SqliteRelayQueue.layer({ filename: ":memory:", policy: { leaseTicks: 60_000, ...policy } })
  return Relay.layer.pipe(
    Layer.provideMerge(queue),
    Layer.provide(transport),
    Layer.provide(NodeHttpClient.layerUndici),
    Layer.provideMerge(receiver)
  )
}

const run = <A, E, R>(effect: Effect.Effect<A, E, R>, policy: Partial<RelayPolicy> = {}) =>
  Effect.flatMap(Ref.make(1000), (maxDelta) => Effect.provide(effect, system(maxDelta, policy)))

/** Enqueues `perFlow` events for each flow, interleaved (A1 B1 C1 … A2 B2 …). */
const enqueueFlows = Effect.flatMap(RelayQueue, (queue) =>
  Effect.forEach(
    Array.from({ length: perFlow }, (_, i) => i + 1).flatMap((seq) =>
      flows.map((flowId, f) => ({ eventId: `${flowId}${seq}`, flowId, body: { delta: deltaOf(f, seq) } }))),
    (input) => queue.enqueue(input),
    { discard: true }
  ))

const expectedTotals = new Map(flows.map((flowId, f) => [flowId, Array.from({ length: perFlow }, (_, i) => deltaOf(f, i + 1)).reduce((a, b) => a + b, 0)]))

/** Asserts the receiver applied every event exactly once, each flow in seq order, and the queue acked all. */
const expectDrained = Effect.gen(function*() {
  const inbox = yield* Inbox
  const queue = yield* RelayQueue
  const log = yield* inbox.read(Receiver.applyLog)
  expect(log).toHaveLength(flows.length * perFlow)
  for (const flowId of flows) {
    expect(log.filter((a) => a.flowId === flowId).map((a) => a.seq)).toEqual(Array.from({ length: perFlow }, (_, i) => i + 1))
  }
  const receipts = yield* inbox.receipts
  expect(receipts).toHaveLength(flows.length * perFlow)
  expect(new Set(receipts.map((r) => r.eventId)).size).toBe(flows.length * perFlow)
  expect(yield* inbox.read(Counter.totals)).toEqual(expectedTotals)
  const snapshot = yield* queue.snapshot
  expect(snapshot.events.filter((e) => e.state !== "acked")).toEqual([])
  return log
})

describe("a relay over HTTP, end to end on a loopback socket", () => {
  it.scopedLive("one worker drains five flows round-robin: each flow in order, all acked, one receipt per event", () =>
    run(Effect.gen(function*() {
      yield* enqueueFlows
      const relay = yield* Relay
      const dispatched: Array<string> = []
      for (let i = 0; i < flows.length * perFlow + 5; i++) {
        const step = yield* relay.step
        if (step._tag === "Idle") break
        expect(step.reply).toEqual({ _tag: "Accepted" })
        expect(step.outcome).toEqual({ _tag: "Acked" })
        dispatched.push(step.claimed.event.eventId)
      }
      const rounds = Array.from({ length: perFlow }, (_, i) => flows.map((f) => `${f}${i + 1}`)).flat()
      expect(dispatched).toEqual(rounds)
      const log = yield* expectDrained
      expect(log.map((a) => a.eventId)).toEqual(rounds)
    })))

  it.scopedLive("three concurrent workers (one batching) under Relay.run drain the same flows without breaking any flow's order", () =>
    run(Effect.gen(function*() {
      yield* enqueueFlows
      const relay = yield* Relay
      const queue = yield* RelayQueue
      const workers = yield* Effect.all([
        Effect.fork(relay.run({ workers: 2, pollInterval: "5 millis" })),
        Effect.fork(relay.run({ workers: 1, batchSize: 3, pollInterval: "5 millis" }))
      ])
      const drained = Effect.flatMap(queue.snapshot, (s) =>
        s.events.every((e) => e.state === "acked") ? Effect.void : Effect.fail("not yet" as const))
      yield* drained.pipe(
        Effect.retry({ schedule: Schedule.spaced(Duration.millis(10)), times: 1_000 }),
        Effect.timeoutFail({ duration: "20 seconds", onTimeout: () => "the relay did not drain in time" as const })
      )
      yield* Fiber.interruptAll(workers)
      yield* expectDrained
    })))

  it.scopedLive("after an operator discards a quarantined head, the flow's next event crosses HTTP with previousSeq and is accepted", () =>
    run(Effect.gen(function*() {
      const queue = yield* RelayQueue
      const relay = yield* Relay
      const inbox = yield* Inbox
      yield* Effect.forEach([
        { eventId: "A1", flowId: "A", body: { delta: 1 } },
        { eventId: "A2", flowId: "A", body: { delta: 5000 } },
        { eventId: "A3", flowId: "A", body: { delta: 2 } }
      ], (input) => queue.enqueue(input), { discard: true })
      expect(yield* relay.step).toMatchObject({ claimed: { event: { eventId: "A1" } }, outcome: { _tag: "Acked" } })
      expect(yield* relay.step).toMatchObject({ claimed: { event: { eventId: "A2" } }, reply: { _tag: "Rejected" }, outcome: { _tag: "Quarantined" } })
      const { event } = yield* queue.inspect("A2")
      yield* queue.discard({ eventId: "A2", expectedGeneration: event.generation, reason: "delta over the receiver's limit" })
      expect(yield* relay.step).toMatchObject({
        claimed: { event: { eventId: "A3" }, previousSeq: 1 },
        reply: { _tag: "Accepted" },
        outcome: { _tag: "Acked" }
      })
      expect(yield* relay.step).toMatchObject({ _tag: "Idle" })
      expect((yield* inbox.read(Receiver.applyLog)).map((a) => a.eventId)).toEqual(["A1", "A3"])
      expect(yield* inbox.progress).toEqual(new Map([["A", 3]]))
      expect(yield* inbox.read(Counter.totals)).toEqual(new Map([["A", 3]]))
    })))

  it.scopedLive("receiver failures stay on their flow: a 500 is retried then quarantined, a refusal quarantined, the rest acked", () =>
    run(Effect.gen(function*() {
      const queue = yield* RelayQueue
      const relay = yield* Relay
      const inbox = yield* Inbox
      yield* Effect.forEach([
        { eventId: "A1", flowId: "A", body: { delta: 1 } },
        { eventId: "A2", flowId: "A", body: { delta: Receiver.PoisonDelta } },
        { eventId: "A3", flowId: "A", body: { delta: 1 } },
        { eventId: "B1", flowId: "B", body: { delta: 5000 } },
        { eventId: "B2", flowId: "B", body: { delta: 1 } },
        { eventId: "C1", flowId: "C", body: { delta: 2 } },
        { eventId: "C2", flowId: "C", body: { delta: 3 } }
      ], (input) => queue.enqueue(input), { discard: true })

      const replies: Array<readonly [string, string]> = []
      for (let i = 0; i < 30; i++) {
        const step = yield* relay.step
        if (step._tag === "Idle") break
        replies.push([step.claimed.event.eventId, step.reply._tag === "Retry" ? step.reply.reason : step.reply._tag])
        if (step.outcome._tag === "Acked") expect(["Accepted", "Duplicate"]).toContain(step.reply._tag)
      }
      const poisoned = "http 500: receiver_store: the receiver's store failed; see the receiver's log"
      expect(replies.filter(([id]) => id === "A2").map(([, r]) => r)).toEqual([poisoned, poisoned, poisoned])
      expect(replies.filter(([id]) => id === "B1").map(([, r]) => r)).toEqual(["Rejected"])

      const state = new Map((yield* queue.snapshot).events.map((e) => [e.eventId, [e.state, e.reason]] as const))
      expect(Object.fromEntries(state)).toEqual({
        A1: ["acked", null],
        A2: ["quarantined", poisoned],
        A3: ["ready", null],
        B1: ["quarantined", "unsupported_delta"],
        B2: ["ready", null],
        C1: ["acked", null],
        C2: ["acked", null]
      })
      expect((yield* inbox.receipts).map((r) => r.eventId)).toEqual(["A1", "C1", "C2"])
      expect(yield* inbox.read(Receiver.applyLog)).toHaveLength(3)
    }), { retryBudget: 3, backoffBase: 0, backoffCap: 0 }))
})
