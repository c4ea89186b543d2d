/**
 * Bad options of a PostgreSQL store are an `InvalidInput` naming the option, from every way of
 * opening one (queue, read-only queue, inbox), before anything connects or is created: never a
 * failed connection, a defect or a silent default.
 */
import { it } from "@effect/vitest"
import { Effect } from "effect"
import { expect } from "vitest"
import { PgInbox, PgRelayQueue } from "../../src/index.js"
import { applied } from "../../src/services/Inbox.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

/** Each bad option, and the words its error must say. */
const cases: ReadonlyArray<readonly [string, Record<string, unknown>, string]> = [
  ["an unknown time source", { time: "sundial" }, "time must be \"process\" or \"database\""],
  ["a time source that is not a string", { time: 3 }, "time must be \"process\" or \"database\""],
  ["a lock timeout that is not a duration", { lockTimeout: "sundial" }, "lockTimeout must be a finite positive duration"],
  ["a negative lock timeout", { lockTimeout: -5 }, "lockTimeout must be a finite positive duration"],
  ["an infinite lock timeout", { lockTimeout: "Infinity" }, "lockTimeout must be a finite positive duration"],
  ["a connect timeout that is not a duration", { connectTimeout: "sundial" }, "connectTimeout must be a finite positive duration"],
  ["a negative pool size", { maxConnections: -1 }, "maxConnections must be a whole number ≥ 1"],
  ["a fractional pool size", { maxConnections: 1.5 }, "maxConnections must be a whole number ≥ 1"],
  ["a pool size that is a string", { maxConnections: "x" }, "maxConnections must be a whole number ≥ 1"],
  ["preparedStatements that is not a boolean", { preparedStatements: "no" }, "preparedStatements must be true or false"],
  ["a retention that is not an object", { retention: "1 day" }, "retention must be an object of durations"]
]

const openers = {
  queue: (options: object) => Effect.asVoid(PgRelayQueue.make(options as PgRelayQueue.PgRelayQueueOptions)),
  "read-only queue": (options: object) => Effect.asVoid(PgRelayQueue.makeReadonly(options as PgRelayQueue.PgRelayQueueOptions)),
  inbox: (options: object) =>
    Effect.asVoid(PgInbox.make({ ...(options as PgInbox.PgInboxOptions), business: { apply: () => Effect.succeed(applied) } }))
} as const

describePg("PostgreSQL: bad store options", (url) => {
  for (const [what, bad, says] of cases) {
    for (const [kind, open] of Object.entries(openers)) {
      // A read-only queue has no retention (it deletes nothing): that case is for the others.
      if (kind === "read-only queue" && "retention" in bad) continue
      it.scopedLive(`${what}: ${kind} → InvalidInput, nothing created`, () =>
        Effect.gen(function*() {
          const schema = yield* freshSchema(url)
          const error = yield* Effect.flip(open({ url: schema.url, maxConnections: 1, ...bad }))
          expect(error).toMatchObject({ _tag: "InvalidInput", message: expect.stringContaining(says) })
          const tables = yield* schema.admin<{ name: string }>`
            SELECT table_name AS name FROM information_schema.tables WHERE table_schema = ${schema.name}`
          expect(tables).toEqual([])
        }))
    }
  }

  for (const [kind, open] of Object.entries(openers)) {
    it.scopedLive(`no url at all: ${kind} → InvalidInput, no connection tried`, () =>
      Effect.gen(function*() {
        const error = yield* Effect.flip(open({ maxConnections: 1 }))
        expect(error).toMatchObject({ _tag: "InvalidInput", message: expect.stringContaining("url must be a connection URL") })
      }))
  }

  it.scopedLive("control: the same options, well formed, open all three", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const good = { url: schema.url, maxConnections: 2, time: "database", lockTimeout: "2 seconds", connectTimeout: 3_000, preparedStatements: false } as const
      yield* PgRelayQueue.make({ ...good, retention: { acked: "1 day" } })
      yield* PgRelayQueue.makeReadonly(good)
      yield* openers.inbox({ ...good, retention: { receipts: null } })
    }))
})
