/**
 * The receiver on PostgreSQL, for receivers that keep their receipts there.
 */
import { Effect, Layer } from "effect"
import type { Scope } from "effect"
import { Inbox } from "../services/Inbox.js"
import type { InboxBusiness, InboxService } from "../services/Inbox.js"
import * as PgStore from "./internal/PgStore.js"
import * as SqlInbox from "./internal/SqlInbox.js"
import type * as Store from "./internal/Store.js"

/** Options of a PostgreSQL inbox. */
export interface PgInboxOptions extends PgStore.PgStoreOptions {
  /** The business step run with each accepted delivery. */
  readonly business: InboxBusiness
}

/** Opens (creating and migrating if needed) an inbox store for the lifetime of the scope. */
export const make = (options: PgInboxOptions): Effect.Effect<InboxService, Store.OpenError, Scope.Scope> =>
  Effect.flatMap(PgStore.open(options, SqlInbox.migrations, SqlInbox.migrationsTable, "inbox"), (store) => SqlInbox.make(store, options.business))

/** A layer providing `Inbox` over a PostgreSQL database. */
export const layer = (options: PgInboxOptions): Layer.Layer<Inbox, Store.OpenError> => Layer.scoped(Inbox, make(options))
