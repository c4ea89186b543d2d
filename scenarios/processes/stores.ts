/**
 * Parent side: creating and inspecting the SQLite files the children share. Each call opens the
 * store, does its work and closes it again, so nothing stays open while a child runs.
 */
import { Effect, Ref } from "effect"
import type { EnqueueInput, ReceiptRecord, Snapshot } from "../../src/index.js"
import { Counter, SqliteInbox, SqliteRelayQueue, TickClock } from "../../src/index.js"

/** Creates (or opens) a queue file and enqueues `events` at `tick`. */
export const createQueue = (filename: string, events: ReadonlyArray<EnqueueInput>, tick = 0): Promise<void> =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function*() {
        const queue = yield* SqliteRelayQueue.make({ filename })
        for (const event of events) yield* queue.enqueue(event)
      })
    ).pipe(TickClock.at(tick))
  )

/** Reads a queue file's whole state. */
export const queueSnapshot = (filename: string): Promise<Snapshot> =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(SqliteRelayQueue.make({ filename }), (queue) => queue.snapshot)))

/** The sample counter business over a fresh limit (the seed's receiver accepts deltas up to 1000). */
export const counterBusiness = (maxDelta = 1000) => Counter.business(Ref.unsafeMake(maxDelta))

/** Creates an inbox file with the counter business (its tables, no receipts). */
export const createInbox = (filename: string): Promise<void> =>
  Effect.runPromise(Effect.scoped(Effect.asVoid(SqliteInbox.make({ filename, business: counterBusiness() }))))

/** What the receiver's store holds. */
export interface InboxState {
  readonly receipts: ReadonlyArray<ReceiptRecord>
  /** Last applied seq per flow. */
  readonly progress: Readonly<Record<string, number>>
  /** The counter projection, per flow (a flow without a row is absent). */
  readonly totals: Readonly<Record<string, number>>
}

/** Reads an inbox file's receipts, progress and counter totals. */
export const inboxState = (filename: string): Promise<InboxState> =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function*() {
        const inbox = yield* SqliteInbox.make({ filename, business: counterBusiness() })
        const receipts = yield* inbox.receipts
        const progress = yield* inbox.progress
        const totals = yield* inbox.read(Counter.totals)
        return { receipts, progress: Object.fromEntries(progress), totals: Object.fromEntries(totals) }
      })
    )
  )
