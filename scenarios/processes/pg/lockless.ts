/**
 * Why the PostgreSQL store takes its advisory lock: the same queue code (the shared
 * `SqlRelayQueue`) over a store whose write transactions are plain READ COMMITTED, without the
 * lock, drained by 6 concurrent workers (each its own connection) at one tick. Counts the claims
 * handed out twice under the same generation, the claims that died on a head another worker had
 * just taken, and the ticket (lost updates of the clock row): why exact claims take the store-wide
 * lock (docs/postgres.md, "Two claim modes").
 *
 *   FAIR_RELAY_PG_URL=postgres://postgres@127.0.0.1:5432/fair_relay_test npx tsx scenarios/processes/pg/lockless.ts
 *
 * The real store (PgRelayQueue) under the same load is checked by test/postgres/concurrency.test.ts.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { Effect, Either, Redacted } from "effect"
import { makePolicy, PgRelayQueue, TickClock } from "../../../src/index.js"
import * as SqlRelayQueue from "../../../src/layers/internal/SqlRelayQueue.js"
import * as RelayQueue from "../../../src/services/RelayQueue.js"
import { execOnConnection } from "../../../src/layers/internal/Store.js"
import { runScript, scratchSchema } from "./scratch.js"

const Workers = 6
const Events = 200
const Flows = 50

const program = Effect.gen(function*() {
  const url = yield* scratchSchema(`lockless_${process.pid}`)
  // Created and filled by the real store (schema and migrations).
  const setup = yield* PgRelayQueue.make({ url, maxConnections: 1 })
  yield* setup.enqueueBatch(Array.from({ length: Events }, (_, i) => ({ eventId: `E${i}`, flowId: `F${i % Flows}`, body: { delta: 1 } })))
    .pipe(TickClock.at(0))
  const policy = Either.getOrThrow(makePolicy({}))
  const lockless = Effect.map(PgClient.make({ url: Redacted.make(url), maxConnections: 1 }), (sql) =>
    RelayQueue.make(SqlRelayQueue.backend({ sql, client: sql, write: sql.withTransaction, read: sql.withTransaction, exec: execOnConnection }), policy))
  const workers = yield* Effect.forEach(Array.from({ length: Workers }), () => lockless)
  const claims: Array<string> = []
  let died = 0
  yield* Effect.forEach(workers, (queue) =>
    Effect.gen(function*() {
      while (died < 1_000) {
        const claimed = yield* Effect.either(Effect.catchAllDefect(queue.claim, (defect) => Effect.fail(defect)))
        if (claimed._tag === "Left") {
          died++
          continue
        }
        if (claimed.right._tag === "Idle") return
        claims.push(`${claimed.right.event.eventId}#${claimed.right.token.generation}`)
        yield* Effect.either(queue.settle(claimed.right.token, { _tag: "Accepted" }))
      }
    }).pipe(TickClock.at(1)), { concurrency: "unbounded", discard: true })
  const snapshot = yield* setup.snapshot
  console.log(JSON.stringify({
    events: Events,
    workers: Workers,
    claims: claims.length,
    claimedTwiceUnderOneGeneration: claims.length - new Set(claims).size,
    claimsThatDied: died,
    ticket: snapshot.clock.ticket,
    acked: snapshot.events.filter((e) => e.state === "acked").length
  }))
})

void runScript(Effect.scoped(program))
