/**
 * Reproduces spurious `ClockRegressed` under lock contention with a real clock: 4 workers (own
 * pools) on one PostgreSQL queue store, Effect's default Clock (milliseconds), a production
 * lease of 30 s and the default `clock: "strict"`, each doing 100 claim → settle(Accepted) steps
 * as fast as it can.
 *
 *   FAIR_RELAY_PG_URL=postgres://postgres@127.0.0.1:5432/fair_relay_test npx tsx scenarios/processes/pg/clockContention.ts
 *
 * A write used to read `now` from the Clock before it took the store's lock (SqlRelayQueue's
 * `writeOp` then): a worker that read `now = t` and then waited for the lock found the tick `t + 1`
 * persisted by the worker that went first, and failed with ClockRegressed although every clock is
 * monotonic. docs/protocol.md (Clock) has the lock taken first, then `now` read, as the queue's
 * `write` now does (`services/internal/relayQueue.ts`): every result is then `ok:Acked`. Prints
 * the counts of each result.
 */
import { Effect } from "effect"
import { PgRelayQueue } from "../../../src/index.js"
import { runScript, scratchSchema } from "./scratch.js"

const program = Effect.gen(function*() {
  const url = yield* scratchSchema(`clock_contention_${process.pid}`)
  const policy = { leaseTicks: "30 seconds" } as const
  const setup = yield* PgRelayQueue.make({ url, maxConnections: 1, policy })
  yield* setup.enqueueBatch(Array.from({ length: 400 }, (_, i) => ({ eventId: `E${i}`, flowId: `F${i % 40}`, body: { delta: 1 } })))
  const workers = yield* Effect.forEach(Array.from({ length: 4 }), () => PgRelayQueue.make({ url, maxConnections: 1, policy }))
  const counts: Record<string, number> = {}
  yield* Effect.forEach(workers, (queue) =>
    Effect.gen(function*() {
      for (let i = 0; i < 100; i++) {
        const step = Effect.flatMap(queue.claim, (claimed) =>
          claimed._tag === "Claimed"
            ? Effect.map(queue.settle(claimed.token, { _tag: "Accepted" }), (outcome) => outcome._tag as string)
            : Effect.succeed<string>(claimed._tag))
        const result = yield* Effect.either(step)
        const key = result._tag === "Right" ? `ok:${result.right}` : result.left._tag
        counts[key] = (counts[key] ?? 0) + 1
      }
    }), { concurrency: "unbounded", discard: true })
  console.log(JSON.stringify(counts))
})

void runScript(Effect.scoped(program))
