/**
 * The store's statements are named prepared statements (planned once per connection). When
 * another process changes a table under them (a newer version migrating the store), a statement
 * whose result changed shape fails once with a typed `SqlError`; the next call prepares it afresh.
 */
import { it } from "@effect/vitest"
import { Effect } from "effect"
import { expect } from "vitest"
import { PgRelayQueue } from "../../src/index.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

describePg("PostgreSQL: prepared statements", (url) => {
  it.scopedLive("a table changed under a prepared statement: one typed failure, then it works again", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 1 })
      yield* queue.enqueue({ eventId: "A1", flowId: "A", body: {} })
      yield* queue.enqueue({ eventId: "A2", flowId: "A", body: {} })
      yield* schema.admin.unsafe(`ALTER TABLE "${schema.name}".relay_flow ADD COLUMN note TEXT`)
      const attempts: Array<string> = []
      for (let i = 0; i < 3; i++) {
        const exit = yield* Effect.exit(queue.enqueue({ eventId: `A${3 + i}`, flowId: "A", body: {} }))
        attempts.push(exit._tag === "Success" ? exit.value._tag : JSON.stringify(exit.cause).includes("SqlError") ? "SqlError" : "other")
      }
      expect(attempts).toEqual(["SqlError", "Enqueued", "Enqueued"])
      expect((yield* queue.snapshot).events.map((e) => [e.eventId, e.seq])).toEqual([["A1", 1], ["A2", 2], ["A4", 3], ["A5", 4]])
    }))
})
