/**
 * One clock for many hosts: with `time: "database"` every transaction reckons with the server's
 * `clock_timestamp()`, so queues whose local clocks disagree by a day share one time line — no
 * `ClockRegressed`, and a lease is as long as the policy says whichever host claimed.
 */
import { it } from "@effect/vitest"
import { Effect } from "effect"
import { expect } from "vitest"
import { seedPolicy } from "../../src/domain/Policy.js"
import { PgRelayQueue, TickClock } from "../../src/index.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

const day = 86_400_000

describePg("PostgreSQL time: \"database\"", (url) => {
  it.scopedLive("two hosts a day apart share the server's time line: no ClockRegressed, leases as long as the policy", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const policy = { ...seedPolicy, leaseTicks: 60_000 }
      const ahead = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, policy, time: "database" })
      const behind = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1, policy, time: "database" })
      const before = Date.now()
      // The hosts' own clocks say a day apart (strict clock mode: a regression would be refused).
      yield* ahead.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } }).pipe(TickClock.at(before + day))
      yield* behind.enqueue({ eventId: "A2", flowId: "A", body: { delta: 2 } }).pipe(TickClock.at(before - day))
      const claimed = yield* ahead.claim.pipe(TickClock.at(before + day))
      if (claimed._tag !== "Claimed") return expect.unreachable()
      const after = Date.now()
      // The server's time (this machine's, within the test's span), not either host's.
      expect(claimed.event.nextAt).toBeGreaterThanOrEqual(before - 1_000)
      expect(claimed.event.nextAt).toBeLessThanOrEqual(after + 1_000)
      expect(claimed.leaseUntil - claimed.event.nextAt).toBeGreaterThanOrEqual(60_000)
      expect(claimed.leaseUntil - claimed.event.nextAt).toBeLessThan(60_000 + (after - before) + 1_000)
      // The host that runs behind settles within the lease: Acked, not Expired, not ClockRegressed.
      expect(yield* behind.settle(claimed.token, { _tag: "Accepted" }).pipe(TickClock.at(before - day))).toEqual({ _tag: "Acked" })
      expect((yield* behind.snapshot).clock.tick).toBeLessThanOrEqual(Date.now() + 1_000)
    }))
})
