/**
 * The queue on one SQLite file. Each layer owns its own connection, so a queue store and a
 * receiver store can live in one program.
 */
import { Config, Effect, Layer } from "effect"
import type { ConfigError } from "effect/ConfigError"
import type { Scope } from "effect"
import type { PolicyInput } from "../domain/Policy.js"
import { RelayQueue } from "../services/RelayQueue.js"
import type { RelayQueueService } from "../services/RelayQueue.js"
import * as SqlRelayQueue from "./internal/SqlRelayQueue.js"
import type * as Store from "./internal/Store.js"
import * as SqliteStore from "./internal/SqliteStore.js"

/** Options of a SQLite queue store. */
export interface SqliteRelayQueueOptions extends SqliteStore.SqliteStoreOptions {
  /** Overrides of the seed policy (lease 5, budget 3, base 2, cap 8, 1 MiB bodies). */
  readonly policy?: PolicyInput | undefined
}

/** Errors of opening a queue store. */
export type OpenError = Store.OpenError

/** Opens (creating and migrating if needed) a queue store for the lifetime of the scope. */
export const make = (options: SqliteRelayQueueOptions): Effect.Effect<RelayQueueService, OpenError, Scope.Scope> =>
  Effect.gen(function*() {
    const policy = yield* SqlRelayQueue.decodePolicy(options.policy, "SqliteRelayQueue.make")
    const store = yield* SqliteStore.open(options, SqlRelayQueue.migrations, SqlRelayQueue.migrationsTable)
    return SqlRelayQueue.make(store, policy)
  })

/** A layer providing `RelayQueue` over one SQLite file (":memory:" allowed). */
export const layer = (options: SqliteRelayQueueOptions): Layer.Layer<RelayQueue, OpenError> =>
  Layer.scoped(RelayQueue, make(options))

/** Like `layer`, reading its options from `Config`. */
export const layerConfig = (
  config: Config.Config.Wrap<SqliteRelayQueueOptions>
): Layer.Layer<RelayQueue, OpenError | ConfigError> =>
  Layer.scoped(RelayQueue, Effect.flatMap(Config.unwrap(config), make))
