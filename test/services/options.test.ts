/**
 * Careless options are refused, never read as something else: a `dryRun` of "yes" is no real
 * prune, a `null` or text policy is not the defaults, a negative retention is not zero, a lease
 * whose deadline would pass 2^53 is not accepted. Each is an `InvalidInput` (`RelayConfigError`
 * for the worker's run options) whose message names the option, and nothing stored changes.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Ref, TestClock } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as MemoryRelayQueue from "../../src/layers/MemoryRelayQueue.js"
import * as PgRelayQueue from "../../src/layers/PgRelayQueue.js"
import * as SqliteInbox from "../../src/layers/SqliteInbox.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import * as Counter from "../../src/sample/Counter.js"
import { Relay } from "../../src/services/Relay.js"
import { RelayQueue } from "../../src/services/RelayQueue.js"
import type { RelayQueueService } from "../../src/services/RelayQueue.js"
import { Transport } from "../../src/services/Transport.js"
import { freshSchema, tempDir } from "../support/backends.js"
import { describePg } from "../postgres/support.js"

/** Bad options of a queue store, and the option name its error must carry. */
const badStoreOptions: ReadonlyArray<readonly [string, Record<string, unknown>, string]> = [
  ["a null policy", { policy: null }, "policy must be an object"],
  ["a text policy", { policy: "x" }, "policy must be an object"],
  ["a misspelt policy setting", { policy: { leaseTick: 5 } }, "policy.leaseTick"],
  ["a lease whose deadline passes 2^53", { policy: { leaseTicks: Number.MAX_SAFE_INTEGER } }, "policy.leaseTicks"],
  ["a backoff cap whose deadline passes 2^53", { policy: { backoffCap: Number.MAX_SAFE_INTEGER } }, "policy.backoffCap"],
  ["a negative lease written as text", { policy: { leaseTicks: "-5 seconds" } }, "policy.leaseTicks"],
  ["an admission that is not one of the two", { policy: { admission: "head" } }, "policy.admission"],
  ["a negative acked retention", { retention: { acked: -1 } }, "retention.acked"],
  ["a negative dedup retention written as text", { retention: { dedup: "-1 days" } }, "retention.dedup"],
  ["a null retention", { retention: null }, "retention must be an object"],
  ["a misspelt option", { polcy: { leaseTicks: 5 } }, "polcy"]
]

const filesOf = (dir: string): Record<string, string> =>
  Object.fromEntries(fs.readdirSync(dir).sort().map((name) => [name, fs.readFileSync(path.join(dir, name)).toString("base64")]))

/** A queue store holding an acked event (A1, acked at 0) and a pending one (A2). */
const seeded = (queue: RelayQueueService) =>
  Effect.gen(function*() {
    yield* queue.enqueueBatch([1, 2].map((i) => ({ eventId: `A${i}`, flowId: "A", body: { delta: i } })))
    const claimed = yield* queue.claim
    if (claimed._tag !== "Claimed") return expect.fail("nothing to claim")
    yield* queue.settle(claimed.token, { _tag: "Accepted" })
  })

const expectRefused = (error: unknown, names: string) =>
  expect(error).toMatchObject({ _tag: "InvalidInput", message: expect.stringContaining(names) })

describe("careless options on SQLite stores", () => {
  for (const [what, bad, names] of badStoreOptions) {
    it.scoped(`${what}: a new store is refused with InvalidInput naming it, and no file is created`, () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const error = yield* Effect.flip(SqliteRelayQueue.make({ filename: path.join(dir, "queue.db"), ...bad } as never))
        expectRefused(error, names)
        expect(fs.readdirSync(dir)).toEqual([])
      }))

    it.scoped(`${what}: an existing store is refused and its files stay byte-identical`, () =>
      Effect.gen(function*() {
        const dir = yield* tempDir
        const filename = path.join(dir, "queue.db")
        yield* Effect.scoped(Effect.flatMap(SqliteRelayQueue.make({ filename }), seeded))
        const before = filesOf(dir)
        expectRefused(yield* Effect.flip(SqliteRelayQueue.make({ filename, ...bad } as never)), names)
        expect(filesOf(dir)).toEqual(before)
      }))
  }

  it.scoped("the lease's bound is stated in the error", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(SqliteRelayQueue.make({ filename: ":memory:", policy: { leaseTicks: Number.MAX_SAFE_INTEGER } }))
      expect(error.message).toContain("315360000000 (3650 days in milliseconds")
    }))

  it.scoped("options that are not an object are refused, not read", () =>
    Effect.gen(function*() {
      expectRefused(yield* Effect.flip(SqliteRelayQueue.make(null as never)), "options must be an object")
      expectRefused(yield* Effect.flip(SqliteRelayQueue.makeReadonly("queue.db" as never)), "options must be an object")
      expectRefused(yield* Effect.flip(SqliteInbox.make(null as never)), "options must be an object")
    }))

  it.scoped("an in-memory queue refuses a null policy and a misspelt option", () =>
    Effect.gen(function*() {
      expectRefused(yield* Effect.flip(MemoryRelayQueue.make({ policy: null } as never)), "policy must be an object")
      expectRefused(yield* Effect.flip(MemoryRelayQueue.make({ polciy: {} } as never)), "polciy")
    }))

  it.scoped("the largest lease and backoff are accepted, and a lease from them stays a safe integer", () =>
    Effect.gen(function*() {
      const queue = yield* SqliteRelayQueue.make({
        filename: ":memory:",
        policy: { leaseTicks: "3650 days", backoffBase: "3650 days", backoffCap: "3650 days" }
      })
      yield* TestClock.setTime(Date.UTC(2100, 0, 1))
      yield* queue.enqueue({ eventId: "A1", flowId: "A", body: {} })
      const claimed = yield* queue.claim
      if (claimed._tag !== "Claimed") return expect.fail("nothing to claim")
      expect(Number.isSafeInteger(claimed.leaseUntil)).toBe(true)
      const outcome = yield* queue.settle(claimed.token, { _tag: "Retry", reason: "later" })
      expect(outcome).toMatchObject({ _tag: "RetryScheduled" })
      if (outcome._tag === "RetryScheduled") expect(Number.isSafeInteger(outcome.nextAt)).toBe(true)
    }))
})

describe("careless prune options", () => {
  const badPrunes: ReadonlyArray<readonly [string, unknown, string]> = [
    ["a dryRun of \"yes\"", { dryRun: "yes" }, "dryRun"],
    ["a dryRun of 1", { dryRun: 1 }, "dryRun"],
    ["a misspelt dryRun", { dryrun: true }, "dryrun"],
    ["null options", null, "prune options must be an object"],
    ["a limit that is text", { limit: "10" }, "limit"]
  ]

  for (const [what, bad, names] of badPrunes) {
    it.scoped(`queue prune with ${what}: InvalidInput naming it, nothing deleted`, () =>
      Effect.gen(function*() {
        const queue = yield* SqliteRelayQueue.make({ filename: ":memory:" })
        yield* seeded(queue)
        // Past the default 7 days: a real prune would delete A1 now.
        yield* TestClock.adjust("8 days")
        const before = yield* queue.snapshot
        expectRefused(yield* Effect.flip(queue.prune(bad as never)), names)
        expect(yield* queue.snapshot).toEqual(before)
        // Control: the same store does prune A1 when asked properly.
        expect(yield* queue.prune({ dryRun: true })).toEqual({ events: 1, dedup: 0, dryRun: true })
      }))
  }

  it.scoped("inbox prune with a dryRun of \"yes\": InvalidInput naming it, no receipt deleted", () =>
    Effect.gen(function*() {
      const inbox = yield* SqliteInbox.make({
        filename: ":memory:",
        business: Counter.business(yield* Ref.make(1000)),
        retention: { receipts: 0 }
      })
      yield* inbox.receive({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 1 } })
      yield* TestClock.adjust("1 second")
      expectRefused(yield* Effect.flip(inbox.prune({ dryRun: "yes" } as never)), "dryRun")
      expect((yield* inbox.receipts).map((r) => r.eventId)).toEqual(["A1"])
    }))

  it.scoped("an inbox refuses a negative receipt retention", () =>
    Effect.gen(function*() {
      const business = Counter.business(yield* Ref.make(1000))
      expectRefused(
        yield* Effect.flip(SqliteInbox.make({ filename: ":memory:", business, retention: { receipts: -1 } })),
        "retention.receipts"
      )
    }))
})

describe("careless run options", () => {
  const badRuns: ReadonlyArray<readonly [string, unknown, string]> = [
    ["null options", null, "run options must be an object"],
    ["a negative poll interval", { pollInterval: -5 }, "pollInterval"],
    ["a misspelt option", { worker: 4 }, "worker"],
    ["a worker count that is text", { workers: "4" }, "workers"],
    ["a negative shutdown grace", { shutdownGrace: "-1 seconds" }, "shutdownGrace"]
  ]

  const relay = Relay.layer.pipe(
    Layer.provideMerge(Layer.succeed(Transport, { deliver: () => Effect.succeed({ _tag: "Accepted" } as const) })),
    Layer.provideMerge(MemoryRelayQueue.layer())
  )

  for (const [what, bad, names] of badRuns) {
    it.scoped(`run with ${what}: RelayConfigError naming it, nothing started`, () =>
      Effect.gen(function*() {
        const queue = yield* RelayQueue
        yield* queue.enqueue({ eventId: "A1", flowId: "A", body: {} })
        const running = yield* Effect.fork((yield* Relay).run(bad as never))
        for (let i = 0; i < 100; i++) yield* Effect.yieldNow()
        const exit = yield* Fiber.poll(running)
        yield* Fiber.interrupt(running)
        expect(exit).toMatchObject({
          _tag: "Some",
          value: { _tag: "Failure", cause: { error: { _tag: "RelayConfigError", message: expect.stringContaining(names) } } }
        })
        expect((yield* queue.snapshot).events).toMatchObject([{ eventId: "A1", state: "ready", attempts: 0 }])
      }).pipe(Effect.provide(relay)))
  }
})

const withSchemaStore = (url: string) => (options: Record<string, unknown>) =>
  PgRelayQueue.make({ url, maxConnections: 2, ...options } as never)

describePg("careless options on PostgreSQL stores", (url) => {
  for (const [what, bad, names] of badStoreOptions) {
    it.scopedLive(`${what}: refused with InvalidInput naming it, nothing created`, () =>
      Effect.gen(function*() {
        const schema = yield* freshSchema(url)
        expectRefused(yield* Effect.flip(withSchemaStore(schema.url)(bad)), names)
        const tables = yield* schema.admin`SELECT table_name FROM information_schema.tables WHERE table_schema = ${schema.name}`
        expect(tables).toEqual([])
      }))
  }

  it.scoped("prune with a dryRun of \"yes\": InvalidInput naming it, nothing deleted", () =>
    Effect.gen(function*() {
      const schema = yield* freshSchema(url)
      const queue: RelayQueueService = yield* withSchemaStore(schema.url)({})
      yield* seeded(queue)
      yield* TestClock.adjust("8 days")
      const before = yield* queue.snapshot
      expectRefused(yield* Effect.flip(queue.prune({ dryRun: "yes" } as never)), "dryRun")
      expect(yield* queue.snapshot).toEqual(before)
    }))
})

describe("keys given as undefined", () => {
  it.scoped("read as absent, also a key the options do not have (a spread of other options)", () =>
    Effect.gen(function*() {
      const queue = yield* SqliteRelayQueue.make({ filename: ":memory:", policy: { leaseTicks: undefined }, claims: undefined } as never)
      expect(queue.policy.leaseTicks).toBe(60_000)
      expect(yield* queue.prune({ dryRun: undefined, limit: undefined })).toEqual({ events: 0, dedup: 0, dryRun: false })
    }))
})
