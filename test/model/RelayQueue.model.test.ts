/**
 * Model-based test of the queue protocol: random sequences of enqueue / enqueueBatch / claim /
 * claimBatch / settle (every reply kind; current, stale, forged and unknown tokens) / settleBatch
 * / settleAndClaim / redrive (right and wrong generations, blank reasons, unknown ids) / setFlowWeight / time
 * advances / clock regressions / malformed calls, under random policies ("strict" and "clamp"
 * clocks, "seed" and "tail" admission), run against a fresh queue and the pure reference model
 * (`QueueModel.ts`, written from docs/protocol.md). Every outcome and the whole snapshot after
 * every command must match. This file runs it on SQLite (a `:memory:` store per sequence);
 * `RelayQueue.model.pg.test.ts` runs the same suite on PostgreSQL.
 *
 *   npm run test:long                                          # the long run, both backends
 *   FAIR_RELAY_MODEL_RUNS=5000 npx vitest run test/model       # sequences on SQLite (default 1,000)
 *   FAIR_RELAY_MODEL_SEED=<seed> FAIR_RELAY_MODEL_PATH=<path> npx vitest run <file>   # replay
 *
 * A failure prints the chunk's seed, the counterexample path and the exact command to replay it.
 * Also: FAIR_RELAY_MODEL_PG_RUNS (sequences on PostgreSQL), FAIR_RELAY_MODEL_CHUNK (sequences per
 * test, default 500), FAIR_RELAY_MODEL_SEED without a path (the base seed the chunks' seeds are
 * derived from), FAIR_RELAY_MODEL_BACKEND=sqlite|postgres (run one backend only),
 * FAIR_RELAY_MODEL_MAX_COMMANDS (longest sequence, default 40), FAIR_RELAY_MODEL_COVERAGE=1
 * (print how often each outcome and error was reached).
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, TestContext } from "effect"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import { RelayQueue as RelayQueueTag } from "../../src/services/RelayQueue.js"
import { sqlite } from "./backends.js"
import { runSequence } from "./runner.js"
import { seedPolicy } from "../../src/domain/Policy.js"
import { articlePolicy, modelSuite, options, runs } from "./suite.js"

modelSuite(sqlite, runs)

describe("the harness itself", () => {
  // Scenario 4 of docs/protocol.md as commands: A1 claimed at 0, Retry → RetryScheduled{nextAt: 2}
  // under the seed policy (lease 5, budget 3, base 2, cap 8); at 2 it is claimed again and acked.
  const policy = articlePolicy
  const commands = [
    { t: "enqueue" as const, spec: { flow: 0, reuse: null, delta: 1, weight: null, idStyle: 0, group: "omit" as const } },
    { t: "claim" as const },
    { t: "settle" as const, spec: { target: "live" as const, pick: 0, forge: "none" as const, reply: { _tag: "Retry" as const, reason: "unavailable" } } },
    { t: "advance" as const, by: 1 },
    { t: "claim" as const },
    { t: "advance" as const, by: 1 },
    { t: "claim" as const },
    { t: "settle" as const, spec: { target: "live" as const, pick: 0, forge: "none" as const, reply: { _tag: "Accepted" as const } } }
  ]

  it("a hand-written sequence (scenario 4 of docs/protocol.md) agrees with the model", () =>
    Effect.runPromise(runSequence(policy, commands, options)))

  it("a queue that differs from the model (another backoff) is caught", async () => {
    await expect(Effect.runPromise(runSequence(policy, commands, options, undefined, { ...policy, backoffBase: 3 })))
      .rejects.toThrow(/RetryScheduled|nextAt/)
  })
})

/** Claims `n` times, acking each and calling `after` with the claimed flow; returns the flows. */
const claimOrder = (n: number, after: (flowId: string, i: number) => Effect.Effect<unknown, unknown>) =>
  Effect.gen(function*() {
    const queue = yield* RelayQueueTag
    const order: Array<string> = []
    for (let i = 0; i < n; i++) {
      const claimed = yield* queue.claim
      if (claimed._tag === "Idle") break
      order.push(claimed.event.flowId)
      yield* queue.settle(claimed.token, { _tag: "Accepted" })
      yield* after(claimed.event.flowId, i)
    }
    return order
  })

const withQueue = <A, E>(effect: Effect.Effect<A, E, RelayQueueTag>) =>
  Effect.runPromise(
    effect.pipe(
      Effect.provide(SqliteRelayQueue.layer({ filename: ":memory:", policy: seedPolicy })),
      Effect.provide(TestContext.TestContext)
    )
  )

// README: "A flow of weight w keeps its place for w claims in a row and then moves behind
// everyone". With B (weight 1) and H (weight 2) always eligible, the dispatch is B H H B H H.
describe("a flow's turn survives an unchanged weight and a re-admission (weights)", () => {
  // src used to reset `burst` on every enqueue that carried a weight, even an unchanged one: a
  // producer passing its weight with every enqueue kept H at the front and B starved.
  it("re-sending an unchanged weight with each enqueue does not restart H's turn", () =>
    withQueue(Effect.gen(function*() {
      const queue = yield* RelayQueueTag
      for (let i = 1; i <= 3; i++) yield* queue.enqueue({ eventId: `B${i}`, flowId: "B", body: { delta: 1 } })
      for (let i = 1; i <= 3; i++) yield* queue.enqueue({ eventId: `H${i}`, flowId: "H", body: { delta: 1 }, weight: 2 })
      let next = 10
      const order = yield* claimOrder(6, (flowId) =>
        queue.enqueue({ eventId: `${flowId}${next++}`, flowId, body: { delta: 1 }, ...(flowId === "H" ? { weight: 2 } : {}) }))
      expect(order).toEqual(["B", "H", "H", "B", "H", "H"])
    })))

  // Under seed admission a drained flow keeps its place (served) when its next event arrives; src
  // used to reset its burst too, so a weight-2 flow refilled after each ack never used up its turn.
  it("a weight-2 flow refilled after each ack still moves behind B after two claims", () =>
    withQueue(Effect.gen(function*() {
      const queue = yield* RelayQueueTag
      for (let i = 1; i <= 6; i++) yield* queue.enqueue({ eventId: `B${i}`, flowId: "B", body: { delta: 1 } })
      yield* queue.enqueue({ eventId: "H1", flowId: "H", body: { delta: 1 }, weight: 2 })
      let next = 2
      const order = yield* claimOrder(6, (flowId) =>
        flowId === "H" ? queue.enqueue({ eventId: `H${next++}`, flowId: "H", body: { delta: 1 } }) : Effect.void)
      expect(order).toEqual(["B", "H", "H", "B", "H", "H"])
    })))

  it("control: without re-sent weights and without draining, the order is B H H B H H", () =>
    withQueue(Effect.gen(function*() {
      const queue = yield* RelayQueueTag
      for (let i = 1; i <= 6; i++) yield* queue.enqueue({ eventId: `B${i}`, flowId: "B", body: { delta: 1 } })
      yield* queue.enqueue({ eventId: "H1", flowId: "H", body: { delta: 1 }, weight: 2 })
      for (let i = 2; i <= 6; i++) yield* queue.enqueue({ eventId: `H${i}`, flowId: "H", body: { delta: 1 } })
      const order = yield* claimOrder(6, () => Effect.void)
      expect(order).toEqual(["B", "H", "H", "B", "H", "H"])
    })))
})
