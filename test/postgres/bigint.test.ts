/**
 * BIGINT columns on PostgreSQL: node-postgres returns int8 as a string (it cannot know whether
 * the value fits a JavaScript number); the store converts every integer it reads (`int` in
 * src/layers/internal/Store.ts), so the protocol sees numbers, also beyond 2^31 — production ticks
 * are epoch milliseconds.
 */
import { seedPolicy } from "../../src/domain/Policy.js"
import { it } from "@effect/vitest"
import { Effect } from "effect"
import { expect } from "vitest"
import { PgRelayQueue, TickClock } from "../../src/index.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

const T = 1_764_460_800_000 // 2025-11-30T00:00:00Z in milliseconds: far above 2^31

describePg("PostgreSQL BIGINT columns", (url) => {
  it.scopedLive("come back as strings from the driver and as numbers from the store, epoch-millisecond ticks included", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, policy: { ...seedPolicy, leaseTicks: 30_000 } })
      yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } }).pipe(TickClock.at(T))
      const claimed = yield* queue.claim.pipe(TickClock.at(T + 5))
      expect(claimed).toMatchObject({ _tag: "Claimed", leaseUntil: T + 30_005, token: { eventId: "A1", generation: 1 } })

      // The driver's view: strings.
      const [raw] = yield* schema.admin.unsafe<Record<string, unknown>>(
        `SELECT tick, ticket FROM "${schema.name}".relay_clock`
      )
      expect(raw).toEqual({ tick: String(T + 5), ticket: "1" })

      // The store's view: numbers, exact.
      const snapshot = yield* queue.snapshot
      expect(snapshot.clock).toEqual({ tick: T + 5, ticket: 1 })
      const [event] = snapshot.events
      expect(event).toMatchObject({ seq: 1, nextAt: T, leaseUntil: T + 30_005, generation: 1, attempts: 1, lifetimeAttempts: 1 })
      for (const value of [event!.seq, event!.nextAt, event!.leaseUntil, event!.generation, snapshot.flows[0]!.served]) {
        expect(typeof value).toBe("number")
      }
      expect(yield* queue.settle(claimed._tag === "Claimed" ? claimed.token : { eventId: "A1", generation: 1 }, { _tag: "Accepted" })
        .pipe(TickClock.at(T + 6))).toEqual({ _tag: "Acked" })
    }))
})
