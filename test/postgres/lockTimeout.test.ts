/**
 * `lockTimeout` on PostgreSQL: a write that cannot get its lock within the timeout fails with a
 * `SqlError` carrying the server's lock-timeout code (55P03) instead of waiting, stores nothing,
 * and the same write goes through once the holder is gone. Exact claims wait for the store's
 * advisory lock; parallel claims wait only for the rows of their own flows.
 */
import { it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { expect } from "vitest"
import { PgRelayQueue } from "../../src/index.js"
import { freshSchema } from "../support/backends.js"
import { describePg, holdInTransaction } from "./support.js"

/** The SQLSTATE somewhere in a failure's cause chain. */
const sqlState = (error: unknown): string | undefined => {
  for (let cause = error; typeof cause === "object" && cause !== null; cause = (cause as { cause?: unknown }).cause) {
    const code = (cause as { code?: unknown }).code
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return code
  }
  return undefined
}

describePg("PostgreSQL: lockTimeout", (url) => {
  const cases = [
    {
      claims: "exact" as const,
      holder: "the store's advisory lock",
      statement: (schema: string) => `SELECT pg_advisory_xact_lock(hashtext('${schema}/relay_queue'))`
    },
    {
      claims: "parallel" as const,
      holder: "flow A's row",
      statement: () => "SELECT flow_id FROM relay_flow WHERE flow_id = 'A' FOR UPDATE"
    }
  ]
  for (const { claims, holder, statement } of cases) {
    it.scopedLive(`${claims} claims: a write that cannot get ${holder} in time fails with 55P03 and stores nothing`, () =>
      Effect.gen(function*() {
        const schema = yield* freshSchema(url)
        const queue = yield* PgRelayQueue.make({ url: schema.url, maxConnections: 2, claims, lockTimeout: "200 millis" })
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: {} })
        const before = yield* queue.snapshot
        const refused = yield* Effect.scoped(Effect.zipRight(
          holdInTransaction(schema.url, statement(schema.name)),
          Effect.exit(queue.enqueue({ eventId: "A2", flowId: "A", body: {} }).pipe(Effect.timeout("20 seconds")))
        ))
        expect(Exit.isFailure(refused)).toBe(true)
        const error = Exit.isFailure(refused) ? refused.cause._tag === "Fail" ? refused.cause.error : undefined : undefined
        expect(error).toMatchObject({ _tag: "SqlError" })
        expect(sqlState(error)).toBe("55P03")
        expect(yield* queue.snapshot).toEqual(before)
        // The holder is gone: the same write goes through.
        expect(yield* queue.enqueue({ eventId: "A2", flowId: "A", body: {} })).toMatchObject({ _tag: "Enqueued", seq: 2 })
      }))
  }
})
