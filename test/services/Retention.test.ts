/**
 * Bounded storage: pruning acked events, their dedup records and receipts, on every SQL backend.
 * Pruning never removes a non-acked event nor touches a flow; a pruned id is still recognised
 * within its dedup window; a late re-delivery after its receipt was pruned is `Duplicate`.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect, Ref, TestClock } from "effect"
import type { Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { seedPolicy } from "../../src/domain/Policy.js"
import type { DeliveryReply } from "../../src/domain/Outcomes.js"
import * as PgInbox from "../../src/layers/PgInbox.js"
import * as PgRelayQueue from "../../src/layers/PgRelayQueue.js"
import * as SqliteInbox from "../../src/layers/SqliteInbox.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import * as Counter from "../../src/sample/Counter.js"
import type { InboxService } from "../../src/services/Inbox.js"
import type { RelayQueueService } from "../../src/services/RelayQueue.js"
import { freshSchema, pgUrl, tempDir } from "../support/backends.js"

/** Acked events kept 100 ticks, dedup records 1000, receipts 100. */
const retention = { acked: 100, dedup: 1000 }
const receipts = 100

interface Stores {
  readonly queue: RelayQueueService
  readonly inbox: InboxService
  readonly totals: Effect.Effect<ReadonlyMap<string, number>, unknown>
  /** The store files (SQLite only), to show a dry run writes nothing. */
  readonly files: ReadonlyArray<string>
}

interface Opener {
  readonly name: string
  readonly open: Effect.Effect<Stores, unknown, Scope.Scope>
}

const withInbox = (queue: RelayQueueService, inbox: (business: ReturnType<typeof Counter.business>) => Effect.Effect<InboxService, unknown, Scope.Scope>, files: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const limit = yield* Ref.make(1000)
    const opened = yield* inbox(Counter.business(limit))
    return { queue, inbox: opened, totals: opened.read(Counter.totals), files }
  })

const sqlite: Opener = {
  name: "sqlite",
  open: Effect.gen(function*() {
    const dir = yield* tempDir
    const files = { queue: path.join(dir, "queue.db"), inbox: path.join(dir, "inbox.db") }
    const queue = yield* SqliteRelayQueue.make({ filename: files.queue, policy: seedPolicy, retention })
    return yield* withInbox(queue, (business) => SqliteInbox.make({ filename: files.inbox, business, retention: { receipts } }), [
      files.queue,
      files.inbox
    ])
  })
}

const postgres = (url: string): Opener => ({
  name: "postgres",
  open: Effect.gen(function*() {
    const q = yield* freshSchema(url)
    const i = yield* freshSchema(url)
    const queue = yield* PgRelayQueue.make({ url: q.url, policy: seedPolicy, retention, maxConnections: 2 })
    return yield* withInbox(queue, (business) => PgInbox.make({ url: i.url, business, retention: { receipts }, maxConnections: 2 }), [])
  })
})

const openers: ReadonlyArray<Opener> = pgUrl === undefined ? [sqlite] : [sqlite, postgres(pgUrl)]

/** Claims the next head (dies when idle) and settles it with `reply`; returns its id. */
const settleNext = (queue: RelayQueueService, reply: DeliveryReply | undefined) =>
  Effect.gen(function*() {
    const claimed = yield* queue.claim
    if (claimed._tag === "Idle") return yield* Effect.dieMessage("expected a claim")
    if (reply !== undefined) yield* queue.settle(claimed.token, reply)
    return claimed.event.eventId
  })

/** A1 acked, B1 acked, C1 quarantined, D1 left inflight, A2 retry scheduled; A3 and B2 ready. */
const mixedStore = (queue: RelayQueueService) =>
  Effect.gen(function*() {
    yield* queue.enqueueBatch([
      { eventId: "A1", flowId: "A", body: { delta: 1 } },
      { eventId: "A2", flowId: "A", body: { delta: 2 } },
      { eventId: "A3", flowId: "A", body: { delta: 3 } },
      { eventId: "B1", flowId: "B", body: { delta: 4 } },
      { eventId: "B2", flowId: "B", body: { delta: 5 } },
      { eventId: "C1", flowId: "C", body: { delta: 6 } },
      { eventId: "D1", flowId: "D", body: { delta: 7 } }
    ])
    yield* settleNext(queue, { _tag: "Accepted" })
    yield* settleNext(queue, { _tag: "Accepted" })
    yield* settleNext(queue, { _tag: "IdConflict" })
    yield* settleNext(queue, undefined)
    yield* settleNext(queue, { _tag: "Retry", reason: "unavailable" })
  })

/** Every remaining claim, in order, each acked. */
const drain = (queue: RelayQueueService) =>
  Effect.gen(function*() {
    const order: Array<string> = []
    for (;;) {
      const claimed = yield* queue.claim
      if (claimed._tag === "Idle") return order
      order.push(claimed.event.eventId)
      yield* queue.settle(claimed.token, { _tag: "Accepted" })
    }
  })

const suite = (opener: Opener) => {
  it.scoped("an acked event is kept for its window and deleted after it, leaving everything else as it was", () =>
    Effect.gen(function*() {
      const pruned = yield* opener.open
      const twin = yield* opener.open
      yield* mixedStore(pruned.queue)
      yield* mixedStore(twin.queue)
      const before = yield* pruned.queue.snapshot

      yield* TestClock.setTime(99)
      expect(yield* pruned.queue.prune()).toEqual({ events: 0, dedup: 0, dryRun: false })
      yield* TestClock.setTime(200)
      expect(yield* pruned.queue.prune({ dryRun: true })).toEqual({ events: 2, dedup: 0, dryRun: true })
      expect(yield* pruned.queue.snapshot).toEqual(before)
      expect(yield* pruned.queue.prune()).toEqual({ events: 2, dedup: 0, dryRun: false })

      const after = yield* pruned.queue.snapshot
      expect(after.flows).toEqual(before.flows)
      expect(after.clock).toEqual(before.clock)
      expect(after.events).toEqual(before.events.filter((e) => e.eventId !== "A1" && e.eventId !== "B1"))
      expect(after.events.map((e) => [e.eventId, e.state])).toEqual([
        ["A2", "ready"], ["A3", "ready"], ["B2", "ready"], ["C1", "quarantined"], ["D1", "inflight"]
      ])
      expect(yield* pruned.queue.prune()).toEqual({ events: 0, dedup: 0, dryRun: false })
      // The rotation goes on exactly as in a store that was never pruned.
      const order = yield* drain(pruned.queue)
      expect(order).toEqual(yield* drain(twin.queue))
      expect(order).toEqual(["B2", "D1", "A2", "A3"])
    }))

  it.scoped("a re-enqueue of a pruned id is Existing or EnqueueConflict within the dedup window, a new event after it", () =>
    Effect.gen(function*() {
      const { queue } = yield* opener.open
      yield* mixedStore(queue)
      yield* TestClock.setTime(200)
      expect((yield* queue.prune()).events).toBe(2)
      expect(yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })).toEqual({ _tag: "Existing", seq: 1 })
      expect(yield* queue.enqueueBatch([
        { eventId: "B1", flowId: "B", body: { delta: 4 } },
        { eventId: "A4", flowId: "A", body: { delta: 8 } }
      ])).toEqual([{ _tag: "Existing", seq: 1 }, { _tag: "Enqueued", seq: 4 }])
      for (const input of [{ eventId: "A1", flowId: "A", body: { delta: 99 } }, { eventId: "A1", flowId: "B", body: { delta: 1 } }]) {
        const error = yield* Effect.flip(queue.enqueue(input))
        expect(error).toMatchObject({ _tag: "EnqueueConflict", eventId: "A1", storedFlowId: "A", storedSeq: 1 })
      }
      expect((yield* queue.snapshot).flows.find((f) => f.flowId === "A")?.seq).toBe(4)

      // Past the dedup window (pruned at 200, kept 1000) the record goes, and the id is new again.
      yield* TestClock.setTime(1199)
      expect((yield* queue.prune()).dedup).toBe(0)
      yield* TestClock.setTime(1200)
      expect(yield* queue.prune({ dryRun: true })).toEqual({ events: 0, dedup: 2, dryRun: true })
      expect(yield* queue.prune()).toEqual({ events: 0, dedup: 2, dryRun: false })
      expect(yield* queue.enqueue({ eventId: "A1", flowId: "A", body: { delta: 1 } })).toEqual({ _tag: "Enqueued", seq: 5 })
    }))

  it.scoped("prune works in bounded batches and stops at its limit", () =>
    Effect.gen(function*() {
      const { queue } = yield* opener.open
      const n = 1_200
      yield* queue.enqueueBatch(Array.from({ length: n }, (_, i) => ({ eventId: `e${i}`, flowId: `f${i}`, body: { delta: 1 } })))
      const claims = yield* queue.claimBatch(n)
      yield* queue.settleBatch(claims.map((c) => ({ token: c.token, reply: { _tag: "Accepted" } })))
      yield* TestClock.setTime(100)
      expect(yield* queue.prune({ limit: 700 })).toEqual({ events: 700, dedup: 0, dryRun: false })
      expect(yield* queue.prune()).toEqual({ events: 500, dedup: 0, dryRun: false })
      const after = yield* queue.snapshot
      expect(after.events).toEqual([])
      expect(after.flows.length).toBe(n)
      expect(after.flows.every((f) => f.seq === 1 && f.headSeq === null)).toBe(true)
    }))

  it.scoped("a late re-delivery after its receipt was pruned is Duplicate and has no second effect", () =>
    Effect.gen(function*() {
      const { inbox, queue, totals } = yield* opener.open
      yield* queue.enqueueBatch([
        { eventId: "A1", flowId: "A", body: { delta: 10 } },
        { eventId: "A2", flowId: "A", body: { delta: 1 } }
      ])
      // The first worker's claim at 0: it delivers, then stalls past its lease.
      const first = yield* queue.claim
      if (first._tag === "Idle") return yield* Effect.dieMessage("expected a claim")
      const delivery = { eventId: "A1", flowId: "A", seq: 1, body: { delta: 10 } }
      expect(yield* inbox.receive(delivery)).toEqual({ _tag: "Accepted" })

      yield* TestClock.setTime(99)
      expect(yield* inbox.prune()).toEqual({ receipts: 0, dryRun: false })
      yield* TestClock.setTime(100)
      expect(yield* inbox.prune({ dryRun: true })).toEqual({ receipts: 1, dryRun: true })
      expect(yield* inbox.prune()).toEqual({ receipts: 1, dryRun: false })
      expect(yield* inbox.receipts).toEqual([])
      expect(yield* inbox.progress).toEqual(new Map([["A", 1]]))

      // A second worker re-claims after the lease and re-sends: Duplicate, acked, no second effect.
      const second = yield* queue.claim
      if (second._tag === "Idle") return yield* Effect.dieMessage("expected a re-claim")
      expect(second.token.generation).toBe(2)
      const reply = yield* inbox.receive(delivery)
      expect(reply).toEqual({ _tag: "Duplicate" })
      expect(yield* queue.settle(second.token, reply)).toEqual({ _tag: "Acked" })
      expect(yield* totals).toEqual(new Map([["A", 10]]))
      // The flow goes on in order.
      expect(yield* inbox.receive({ eventId: "A2", flowId: "A", seq: 2, body: { delta: 1 } })).toEqual({ _tag: "Accepted" })
      expect(yield* totals).toEqual(new Map([["A", 11]]))
    }))

  it.scoped("bad retention and prune options are typed errors", () =>
    Effect.gen(function*() {
      const { queue } = yield* opener.open
      expect(yield* Effect.flip(queue.prune({ limit: 0 }))).toMatchObject({ _tag: "InvalidInput" })
      expect(yield* Effect.flip(queue.prune({ limit: 1.5 }))).toMatchObject({ _tag: "InvalidInput" })
    }))
}

for (const opener of openers) describe(opener.name, () => suite(opener))

describe("sqlite files", () => {
  it.scoped("a dry run writes nothing: both store files stay byte-identical", () =>
    Effect.gen(function*() {
      const { files, inbox, queue } = yield* sqlite.open
      yield* mixedStore(queue)
      yield* inbox.receive({ eventId: "A1", flowId: "A", seq: 1, body: { delta: 1 } })
      yield* TestClock.setTime(500)
      const read = () => files.flatMap((file) => [file, `${file}-wal`]).map((f) => (fs.existsSync(f) ? fs.readFileSync(f) : null))
      const before = read()
      expect((yield* queue.prune({ dryRun: true })).events).toBe(2)
      expect((yield* inbox.prune({ dryRun: true })).receipts).toBe(1)
      expect(read()).toEqual(before)
    }))

  it.scoped("retention options are validated when the store opens", () =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const error = yield* Effect.flip(SqliteRelayQueue.make({ filename: path.join(dir, "q.db"), retention: { acked: "soon" as never } }))
      expect(error).toMatchObject({ _tag: "InvalidInput" })
      const inbox = yield* Effect.flip(
        SqliteInbox.make({ filename: path.join(dir, "i.db"), business: Counter.business(yield* Ref.make(1)), retention: { receipts: "later" as never } })
      )
      expect(inbox).toMatchObject({ _tag: "InvalidInput" })
    }))
})
