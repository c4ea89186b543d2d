/**
 * The queue on PostgreSQL, for many worker processes on many machines. Same contract and
 * outcomes as `SqliteRelayQueue`; see docs/postgres.md for the locking design.
 */
import { Config, Effect, Layer } from "effect"
import type { ConfigError } from "effect/ConfigError"
import type { Scope } from "effect"
import type { PolicyMismatch } from "../domain/Errors.js"
import type { PolicyInput } from "../domain/Policy.js"
import { RelayQueue } from "../services/RelayQueue.js"
import { decodeRetention } from "../services/Retention.js"
import type { RetentionInput } from "../services/Retention.js"
import type { RelayQueueService } from "../services/RelayQueue.js"
import * as PgStore from "./internal/PgStore.js"
import * as SqlRelayQueue from "./internal/SqlRelayQueue.js"
import type * as Store from "./internal/Store.js"

/** Options of a PostgreSQL queue store. */
export interface PgRelayQueueOptions extends PgStore.PgStoreOptions {
  /** The policy; see `SqliteRelayQueueOptions.policy` (a store keeps its protocol settings). */
  readonly policy?: PolicyInput | undefined
  /** How long acked events and their dedup records are kept (defaults: 7 and 30 days; see `Retention`). */
  readonly retention?: RetentionInput | undefined
}

/** Errors of opening a queue store. */
export type OpenError = Store.OpenError | PolicyMismatch

/** Opens (creating and migrating if needed) a queue store for the lifetime of the scope. */
export const make = (options: PgRelayQueueOptions): Effect.Effect<RelayQueueService, OpenError, Scope.Scope> =>
  Effect.gen(function*() {
    const requested = yield* SqlRelayQueue.decodePolicy(options.policy, "PgRelayQueue.make")
    const retention = yield* decodeRetention(options.retention, "PgRelayQueue.make")
    const store = yield* PgStore.open(options, SqlRelayQueue.migrations, SqlRelayQueue.migrationsTable, "relay_queue")
    return yield* SqlRelayQueue.open(store, requested, options.policy, "PostgreSQL queue store", "create", retention)
  })

/** A layer providing `RelayQueue` over a PostgreSQL database. */
export const layer = (options: PgRelayQueueOptions): Layer.Layer<RelayQueue, OpenError> => Layer.scoped(RelayQueue, make(options))

/** Like `layer`, reading its options from `Config`. */
export const layerConfig = (
  config: Config.Config.Wrap<PgRelayQueueOptions>
): Layer.Layer<RelayQueue, OpenError | ConfigError> => Layer.scoped(RelayQueue, Effect.flatMap(Config.unwrap(config), make))

/**
 * Opens an existing queue store read-only for the lifetime of the scope (every transaction is
 * READ ONLY; writes fail with a `SqlError` caused by `ReadonlyStore`): for operators' tools.
 */
export const makeReadonly = (options: PgRelayQueueOptions): Effect.Effect<RelayQueueService, OpenError, Scope.Scope> =>
  Effect.gen(function*() {
    const requested = yield* SqlRelayQueue.decodePolicy(options.policy, "PgRelayQueue.makeReadonly")
    const store = yield* PgStore.openReadonly(options, SqlRelayQueue.migrations, SqlRelayQueue.migrationsTable, "relay_queue")
    return yield* SqlRelayQueue.open(store, requested, options.policy, "PostgreSQL queue store", "readonly")
  })
