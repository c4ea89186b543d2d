/**
 * The receiver on its own SQLite file (":memory:" allowed), separate from the queue's.
 */
import { Effect, Layer } from "effect"
import type { Scope } from "effect"
import * as Options from "../domain/Options.js"
import { Inbox } from "../services/Inbox.js"
import { decodeInboxRetention } from "../services/Retention.js"
import type { InboxRetentionInput } from "../services/Retention.js"
import type { InboxBusiness, InboxService } from "../services/Inbox.js"
import * as SqlInbox from "./internal/SqlInbox.js"
import type * as Store from "./internal/Store.js"
import * as SqliteStore from "./internal/SqliteStore.js"

export type { OpenError } from "./internal/Store.js"

/** Options of a SQLite inbox. */
export interface SqliteInboxOptions extends SqliteStore.SqliteStoreOptions {
  /** The business step run with each accepted delivery. */
  readonly business: InboxBusiness
  /** How long receipts are kept (default 7 days; `null` = forever); progress is always kept. */
  readonly retention?: InboxRetentionInput | undefined
}

const checkOptions = Options.keysOnly<SqliteInboxOptions>({
  filename: true,
  busyTimeoutMillis: true,
  synchronous: true,
  business: true,
  retention: true
})

/** Opens (creating and migrating if needed) an inbox store for the lifetime of the scope. */
export const make = (options: SqliteInboxOptions): Effect.Effect<InboxService, Store.OpenError, Scope.Scope> =>
  Effect.gen(function*() {
    yield* checkOptions(options, "SqliteInbox.make")
    const retention = yield* decodeInboxRetention(options.retention, "SqliteInbox.make")
    const store = yield* SqliteStore.open(options, SqlInbox.migrations, SqlInbox.migrationsTable)
    return yield* SqlInbox.make(store, options.business, retention)
  })

/** A layer providing `Inbox` over one SQLite file. */
export const layer = (options: SqliteInboxOptions): Layer.Layer<Inbox, Store.OpenError> =>
  Layer.scoped(Inbox, make(options))
