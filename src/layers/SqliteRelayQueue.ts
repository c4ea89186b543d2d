/**
 * The queue on one SQLite file. Each layer owns its own connection, so a queue store and a
 * receiver store can live in one program.
 */
import { Config, Effect, Layer } from "effect"
import type { ConfigError } from "effect/ConfigError"
import type { Scope } from "effect"
import type { PolicyMismatch } from "../domain/Errors.js"
import type { PolicyInput } from "../domain/Policy.js"
import { RelayQueue } from "../services/RelayQueue.js"
import type { RelayQueueService } from "../services/RelayQueue.js"
import * as SqlRelayQueue from "./internal/SqlRelayQueue.js"
import type * as Store from "./internal/Store.js"
import * as SqliteStore from "./internal/SqliteStore.js"

/** Options of a SQLite queue store. */
export interface SqliteRelayQueueOptions extends SqliteStore.SqliteStoreOptions {
  /**
   * The policy (defaults: `defaultPolicy`; the article's numbers: `Policy.seed`). A new store keeps
   * its protocol settings (lease, budget, backoff, admission); an existing store's own settings
   * are adopted, and one given here that differs from them is refused with `PolicyMismatch`.
   */
  readonly policy?: PolicyInput | undefined
}

/** Errors of opening a queue store. */
export type OpenError = Store.OpenError | PolicyMismatch

/** Opens (creating and migrating if needed) a queue store for the lifetime of the scope. */
export const make = (options: SqliteRelayQueueOptions): Effect.Effect<RelayQueueService, OpenError, Scope.Scope> =>
  Effect.gen(function*() {
    yield* SqlRelayQueue.decodePolicy(options.policy, "SqliteRelayQueue.make")
    const store = yield* SqliteStore.open(options, SqlRelayQueue.migrations, SqlRelayQueue.migrationsTable)
    return yield* SqlRelayQueue.open(store, options.policy, options.filename)
  })

/** A layer providing `RelayQueue` over one SQLite file (":memory:" allowed). */
export const layer = (options: SqliteRelayQueueOptions): Layer.Layer<RelayQueue, OpenError> =>
  Layer.scoped(RelayQueue, make(options))

/** Like `layer`, reading its options from `Config`. */
export const layerConfig = (
  config: Config.Config.Wrap<SqliteRelayQueueOptions>
): Layer.Layer<RelayQueue, OpenError | ConfigError> =>
  Layer.scoped(RelayQueue, Effect.flatMap(Config.unwrap(config), make))

/**
 * Opens an existing queue store read-only for the lifetime of the scope: nothing is created,
 * migrated or written (SQLITE_OPEN_READONLY); reads work, writes fail with a `SqlError` caused by
 * `ReadonlyStore`. A missing file is a `SqlError`; a foreign, older or newer store an `IncompatibleStore`.
 */
export const makeReadonly = (options: SqliteRelayQueueOptions): Effect.Effect<RelayQueueService, OpenError, Scope.Scope> =>
  Effect.gen(function*() {
    const policy = yield* SqlRelayQueue.decodePolicy(options.policy, "SqliteRelayQueue.makeReadonly")
    const store = yield* SqliteStore.openReadonly(options, SqlRelayQueue.migrations, SqlRelayQueue.migrationsTable)
    return SqlRelayQueue.make(store, policy)
  })
