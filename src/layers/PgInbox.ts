/**
 * The receiver on PostgreSQL, for receivers that keep their receipts there.
 */
import { Effect, Layer } from "effect"
import type { Scope } from "effect"
import * as Options from "../domain/Options.js"
import { Inbox } from "../services/Inbox.js"
import { decodeInboxRetention } from "../services/Retention.js"
import type { InboxRetentionInput } from "../services/Retention.js"
import type { InboxBusiness, InboxService } from "../services/Inbox.js"
import * as PgStore from "./internal/PgStore.js"
import * as SqlInbox from "./internal/SqlInbox.js"
import type * as Store from "./internal/Store.js"

export type { OpenError } from "./internal/Store.js"

/** Options of a PostgreSQL inbox. */
export interface PgInboxOptions extends PgStore.PgStoreOptions {
  /** The business step run with each accepted delivery. */
  readonly business: InboxBusiness
  /** How long receipts are kept (default 7 days; `null` = forever); progress is always kept. */
  readonly retention?: InboxRetentionInput | undefined
}

const checkOptions = Options.keysOnly<PgInboxOptions>({ ...PgStore.storeKeys, business: true, retention: true })

/** Opens (creating and migrating if needed) an inbox store for the lifetime of the scope. */
export const make = (options: PgInboxOptions): Effect.Effect<InboxService, Store.OpenError, Scope.Scope> =>
  Effect.gen(function*() {
    yield* checkOptions(options, "PgInbox.make")
    const retention = yield* decodeInboxRetention(options.retention, "PgInbox.make")
    const store = yield* PgStore.open(options, SqlInbox.migrations, SqlInbox.migrationsTable, "inbox")
    return yield* SqlInbox.make(store, options.business, retention)
  })

/** A layer providing `Inbox` over a PostgreSQL database. */
export const layer = (options: PgInboxOptions): Layer.Layer<Inbox, Store.OpenError> => Layer.scoped(Inbox, make(options))
