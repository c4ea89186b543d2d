/**
 * Parent side of the PostgreSQL real-process scenarios: creating and inspecting the stores the
 * children share. A store is a schema of a database, named by a URL whose search path selects
 * it (see `withSchema` in test/support/backends.ts). Each call opens its own pool and closes it,
 * so nothing of the parent's stays connected while a child runs.
 */
import { Effect } from "effect"
import type { EnqueueInput, Snapshot } from "../../../src/index.js"
import { Counter, PgInbox, PgRelayQueue, TickClock } from "../../../src/index.js"
import { counterBusiness } from "../stores.js"
import type { InboxState } from "../stores.js"

export type { InboxState } from "../stores.js"

/** Creates (or opens) a queue store at `url` and enqueues `events` at `tick`. */
export const createPgQueue = (url: string, events: ReadonlyArray<EnqueueInput>, tick = 0): Promise<void> =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function*() {
        const queue = yield* PgRelayQueue.make({ url, maxConnections: 1 })
        for (const event of events) yield* queue.enqueue(event)
      })
    ).pipe(TickClock.at(tick))
  )

/** Reads a queue store's whole state. */
export const pgQueueSnapshot = (url: string): Promise<Snapshot> =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(PgRelayQueue.make({ url, maxConnections: 1 }), (queue) => queue.snapshot)))

/** Creates an inbox store with the counter business (its tables, no receipts). */
export const createPgInbox = (url: string): Promise<void> =>
  Effect.runPromise(Effect.scoped(Effect.asVoid(PgInbox.make({ url, business: counterBusiness(), maxConnections: 1 }))))

/** Reads an inbox store's receipts, progress and counter totals. */
export const pgInboxState = (url: string): Promise<InboxState> =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function*() {
        const inbox = yield* PgInbox.make({ url, business: counterBusiness(), maxConnections: 1 })
        const receipts = yield* inbox.receipts
        const progress = yield* inbox.progress
        const totals = yield* inbox.read(Counter.totals)
        return { receipts, progress: Object.fromEntries(progress), totals: Object.fromEntries(totals) }
      })
    )
  )
