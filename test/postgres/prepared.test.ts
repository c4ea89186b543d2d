/**
 * When another process changes a table under the store (a newer version migrating it), nothing
 * the store sends was prepared for the old shape: the server functions plan their statements
 * afresh, and the store's other statements are never named prepared statements. Both go on.
 */
import { it } from "@effect/vitest"
import { Effect } from "effect"
import { expect } from "vitest"
import { PgRelayQueue } from "../../src/index.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

describePg("PostgreSQL: prepared statements", (url) => {
  it.scopedLive("a table changed under the store: its operations go on", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1 })
      yield* queue.enqueue({ eventId: "A1", flowId: "A", body: {} })
      yield* queue.enqueue({ eventId: "A2", flowId: "A", body: {} })
      // The listing's statement run on the store's connection before the change.
      yield* queue.flows()
      yield* schema.admin.unsafe(`ALTER TABLE "${schema.name}".relay_flow ADD COLUMN note TEXT`)
      const outcome = <A, E>(effect: Effect.Effect<A, E>) =>
        Effect.map(Effect.exit(effect), (exit) => exit._tag === "Success" ? "ok" : JSON.stringify(exit.cause).includes("SqlError") ? "SqlError" : "other")
      const enqueues: Array<string> = []
      for (let i = 0; i < 3; i++) enqueues.push(yield* outcome(queue.enqueue({ eventId: `A${3 + i}`, flowId: "A", body: {} })))
      expect(enqueues).toEqual(["ok", "ok", "ok"])
      const listings: Array<string> = []
      for (let i = 0; i < 3; i++) listings.push(yield* outcome(queue.flows()))
      expect(listings).toEqual(["ok", "ok", "ok"])
      expect((yield* queue.snapshot).events.map((e) => [e.eventId, e.seq])).toEqual([["A1", 1], ["A2", 2], ["A3", 3], ["A4", 4], ["A5", 5]])
    }))
})
