/**
 * The stores of the real-process scenarios, on either backend. A store is named by a *locator*:
 * a SQLite file path, or a `postgres://` URL whose search path selects a schema (`withSchema` in
 * test/support/backends.ts). The children open their stores with `openQueue`, `queueLayer` and
 * `inboxLayer`; the parent creates and inspects them with the helpers below, each of which opens
 * the store, does its work and closes it again, so nothing of the parent's stays open (or
 * connected) while a child runs.
 */
import { Effect, Ref } from "effect"
import type { Layer, Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import type { EnqueueInput, InboxBusiness, InboxService, PolicyInput, ReceiptRecord, RelayQueueService, Snapshot } from "../../src/index.js"
import { seedPolicy } from "../../src/domain/Policy.js"
// The modules themselves rather than src/index.ts: a child loads less (faster start-up).
import * as PgInbox from "../../src/layers/PgInbox.js"
import * as PgRelayQueue from "../../src/layers/PgRelayQueue.js"
import * as SqliteInbox from "../../src/layers/SqliteInbox.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import * as Counter from "../../src/sample/Counter.js"
import type { OpenError } from "../../src/layers/SqliteRelayQueue.js"
import type { Inbox } from "../../src/services/Inbox.js"
import type { RelayQueue } from "../../src/services/RelayQueue.js"
import * as TickClock from "../../src/services/TickClock.js"

/** Whether `locator` names a PostgreSQL store (a `postgres://` or `postgresql://` URL). */
export const isPostgres = (locator: string): boolean => /^postgres(ql)?:\/\//.test(locator)

/** How a process opens a store. */
export interface OpenOptions {
  /** Size of a PostgreSQL store's connection pool (default 1); a SQLite file has no pool. */
  readonly maxConnections?: number | undefined
  /** The policy a new store is created with (an existing one keeps its own; default: adopt it). */
  readonly policy?: PolicyInput | undefined
}

const pgOptions = (locator: string, options: OpenOptions) => ({ url: locator, maxConnections: options.maxConnections ?? 1, policy: options.policy })

/** Opens (creating and migrating if needed) the queue store at `locator` for the scope. */
export const openQueue = (locator: string, options: OpenOptions = {}): Effect.Effect<RelayQueueService, OpenError, Scope.Scope> =>
  isPostgres(locator) ? PgRelayQueue.make(pgOptions(locator, options)) : SqliteRelayQueue.make({ filename: locator, policy: options.policy })

/** A layer providing `RelayQueue` over the store at `locator`. */
export const queueLayer = (locator: string, options: OpenOptions = {}): Layer.Layer<RelayQueue, OpenError> =>
  isPostgres(locator) ? PgRelayQueue.layer(pgOptions(locator, options)) : SqliteRelayQueue.layer({ filename: locator })

/** Opens (creating and migrating if needed) the inbox store at `locator` for the scope. */
export const openInbox = (
  locator: string,
  business: InboxBusiness,
  options: OpenOptions = {}
): Effect.Effect<InboxService, OpenError, Scope.Scope> =>
  isPostgres(locator)
    ? PgInbox.make({ ...pgOptions(locator, options), business })
    : SqliteInbox.make({ filename: locator, business })

/** A layer providing `Inbox` over the store at `locator`. */
export const inboxLayer = (
  locator: string,
  business: InboxBusiness,
  options: OpenOptions = {}
): Layer.Layer<Inbox, OpenError> =>
  isPostgres(locator)
    ? PgInbox.layer({ ...pgOptions(locator, options), business })
    : SqliteInbox.layer({ filename: locator, business })

/** Where a run's fresh stores come from. */
export interface StoreBackend {
  readonly name: string
  /**
   * The locator of a fresh, empty store. `name` names it within the run (`claim-race-3`,
   * `claim-before-commit/queue`): a SQLite backend makes it a file name; a PostgreSQL backend
   * may ignore it.
   */
  readonly create: (name: string) => Promise<string>
}

/** SQLite files under `dir`: store `name` is `dir/<name>.db` (its subdirectory created). */
export const sqliteFiles = (dir: string): StoreBackend => ({
  name: "sqlite",
  create: async (name) => {
    const file = path.join(dir, `${name}.db`)
    fs.mkdirSync(path.dirname(file), { recursive: true })
    return file
  }
})

/** Where a run puts its stores: SQLite files in `dir`, or the stores of any backend. */
export type StoresOption = { readonly dir: string } | { readonly backend: StoreBackend }

/** The backend a `StoresOption` names. */
export const backendOf = (option: StoresOption): StoreBackend => "backend" in option ? option.backend : sqliteFiles(option.dir)

/** Creates (or opens) a queue store running the article's policy and enqueues `events` at `tick`. */
export const createQueue = (locator: string, events: ReadonlyArray<EnqueueInput>, tick = 0): Promise<void> =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function*() {
        const queue = yield* openQueue(locator, { policy: seedPolicy })
        for (const event of events) yield* queue.enqueue(event)
      })
    ).pipe(TickClock.at(tick))
  )

/** Reads a queue store's whole state. */
export const queueSnapshot = (locator: string): Promise<Snapshot> =>
  Effect.runPromise(Effect.scoped(Effect.flatMap(openQueue(locator), (queue) => queue.snapshot)))

/** The sample counter business over a fresh limit (the seed's receiver accepts deltas up to 1000). */
export const counterBusiness = (maxDelta = 1000) => Counter.business(Ref.unsafeMake(maxDelta))

/** Creates an inbox store with the counter business (its tables, no receipts). */
export const createInbox = (locator: string): Promise<void> =>
  Effect.runPromise(Effect.scoped(Effect.asVoid(openInbox(locator, counterBusiness()))))

/** What the receiver's store holds. */
export interface InboxState {
  readonly receipts: ReadonlyArray<ReceiptRecord>
  /** Last applied seq per flow. */
  readonly progress: Readonly<Record<string, number>>
  /** The counter projection, per flow (a flow without a row is absent). */
  readonly totals: Readonly<Record<string, number>>
}

/** Reads an inbox store's receipts, progress and counter totals. */
export const inboxState = (locator: string): Promise<InboxState> =>
  Effect.runPromise(
    Effect.scoped(
      Effect.gen(function*() {
        const inbox = yield* openInbox(locator, counterBusiness())
        const receipts = yield* inbox.receipts
        const progress = yield* inbox.progress
        const totals = yield* inbox.read(Counter.totals)
        return { receipts, progress: Object.fromEntries(progress), totals: Object.fromEntries(totals) }
      })
    )
  )
