/**
 * The queue on one SQLite file. Each layer owns its own connection, so a queue store and a
 * receiver store can live in one program.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Config, Effect, Layer } from "effect"
import type { ConfigError } from "effect/ConfigError"
import type { Scope } from "effect"
import type { PolicyMismatch } from "../domain/Errors.js"
import * as Options from "../domain/Options.js"
import type { PolicyInput } from "../domain/Policy.js"
import { RelayQueue } from "../services/RelayQueue.js"
import { decodeRetention } from "../services/Retention.js"
import type { RetentionInput } from "../services/Retention.js"
import type { RelayQueueService } from "../services/RelayQueue.js"
import * as QueueSchema from "./internal/QueueSchema.js"
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
  /**
   * How long acked events and their dedup records are kept (defaults: 7 and 30 days; see
   * `Retention`), until the store keeps a retention set by `setPolicy`: then the store's.
   */
  readonly retention?: RetentionInput | undefined
}

/** Errors of opening a queue store. */
export type OpenError = Store.OpenError | PolicyMismatch

const checkOptions = Options.keysOnly<SqliteRelayQueueOptions>({
  filename: true,
  busyTimeoutMillis: true,
  synchronous: true,
  policy: true,
  retention: true
})

/** Opens (creating and migrating if needed) a queue store for the lifetime of the scope. */
export const make = (options: SqliteRelayQueueOptions): Effect.Effect<RelayQueueService, OpenError, Scope.Scope> =>
  Effect.gen(function*() {
    yield* checkOptions(options, "SqliteRelayQueue.make")
    const requested = yield* QueueSchema.decodePolicy(options.policy, "SqliteRelayQueue.make")
    const retention = yield* decodeRetention(options.retention, "SqliteRelayQueue.make")
    const store = yield* SqliteStore.open(options, QueueSchema.migrations, QueueSchema.migrationsTable)
    return yield* SqlRelayQueue.open(store, requested, options.policy, options.filename, "create", retention)
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
    yield* checkOptions(options, "SqliteRelayQueue.makeReadonly")
    const requested = yield* QueueSchema.decodePolicy(options.policy, "SqliteRelayQueue.makeReadonly")
    const store = yield* SqliteStore.openReadonly(options, QueueSchema.migrations, QueueSchema.migrationsTable)
    return yield* SqlRelayQueue.open(store, requested, options.policy, options.filename, "readonly")
  })

/** Options of a queue on the application's own SQLite client. */
export interface SqliteRelayQueueClientOptions {
  /** The policy; see `SqliteRelayQueueOptions.policy`. */
  readonly policy?: PolicyInput | undefined
  /** How long a transaction of the queue's own waits for another process's write lock (default 5000 ms). */
  readonly busyTimeoutMillis?: number | undefined
}

const checkClientOptions = Options.keysOnly<SqliteRelayQueueClientOptions>({ policy: true, busyTimeoutMillis: true })

/**
 * Opens the queue on the application's own `SqlClient` (a SQLite client from the context): its
 * tables live in the application's database (own migrations table, `relay_migrations`, applied
 * here), so `enqueue` and `enqueueBatch` inside `withImmediateTransaction` commit with the
 * application's rows, or not at all — a transactional outbox. Every other operation runs in a
 * transaction of its own and must be called outside the application's.
 */
export const makeClient = (
  options: SqliteRelayQueueClientOptions = {}
): Effect.Effect<RelayQueueService, OpenError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    yield* checkClientOptions(options, "SqliteRelayQueue.makeClient")
    const requested = yield* QueueSchema.decodePolicy(options.policy, "SqliteRelayQueue.makeClient")
    const sql = yield* SqlClient.SqlClient
    const store = yield* SqliteStore.fromClient(sql, QueueSchema.migrations, QueueSchema.migrationsTable, options)
    return yield* SqlRelayQueue.open(store, requested, options.policy, "the application's database")
  })

/** A layer providing `RelayQueue` on the application's own SQLite `SqlClient` (see `makeClient`). */
export const layerClient = (
  options: SqliteRelayQueueClientOptions = {}
): Layer.Layer<RelayQueue, OpenError, SqlClient.SqlClient> => Layer.effect(RelayQueue, makeClient(options))

/**
 * Runs an effect in a transaction of the application's SQLite client that holds the write lock
 * from its start: the way to enqueue together with application writes (an enqueue inside any
 * other transaction of that client fails with a `SqlError` caused by `TransactionMisuse`).
 *
 * Given the client, `withImmediateTransaction(sql)(effect)` adds nothing to the effect's
 * requirements, so a service that holds its client keeps the type of its own interface (as with
 * PostgreSQL's `sql.withTransaction`). Given the effect alone, it reads the client from the context.
 */
export function withImmediateTransaction(
  sql: SqlClient.SqlClient
): <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
export function withImmediateTransaction<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R | SqlClient.SqlClient>
export function withImmediateTransaction<A, E, R>(
  clientOrEffect: SqlClient.SqlClient | Effect.Effect<A, E, R>
):
  | (<A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>)
  | Effect.Effect<A, E | SqlError, R | SqlClient.SqlClient>
{
  return Effect.isEffect(clientOrEffect)
    ? Effect.flatMap(SqlClient.SqlClient, (sql) => SqliteStore.withImmediateTransaction(sql)(clientOrEffect))
    : SqliteStore.withImmediateTransaction(clientOrEffect)
}

export { TransactionMisuse } from "./internal/Store.js"
