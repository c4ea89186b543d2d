/**
 * The queue on PostgreSQL, for many worker processes on many machines. Same contract and
 * outcomes as `SqliteRelayQueue`; see docs/postgres.md for the locking design.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Config, Effect, Either, Layer } from "effect"
import type { ConfigError } from "effect/ConfigError"
import type { Scope } from "effect"
import { InvalidInput } from "../domain/Errors.js"
import type { PolicyMismatch } from "../domain/Errors.js"
import * as Options from "../domain/Options.js"
import type { PolicyInput } from "../domain/Policy.js"
import * as RelayQueue from "../services/RelayQueue.js"
import { decodeRetention } from "../services/Retention.js"
import type { RetentionInput } from "../services/Retention.js"
import type { RelayQueueService } from "../services/RelayQueue.js"
import * as PgFunctions from "./internal/PgFunctions.js"
import * as PgOperations from "./internal/PgOperations.js"
import * as PgParallel from "./internal/PgParallel.js"
import * as PgStore from "./internal/PgStore.js"
import * as QueueSchema from "./internal/QueueSchema.js"
import * as SqlRelayQueue from "./internal/SqlRelayQueue.js"
import type * as Store from "./internal/Store.js"

/** Options of a PostgreSQL queue store. */
export interface PgRelayQueueOptions extends PgStore.PgStoreOptions {
  /** The policy; see `SqliteRelayQueueOptions.policy` (a store keeps its protocol settings). */
  readonly policy?: PolicyInput | undefined
  /**
   * How long acked events and their dedup records are kept (defaults: 7 and 30 days; see
   * `Retention`), until the store keeps a retention set by `setPolicy`: then the store's.
   */
  readonly retention?: RetentionInput | undefined
  /**
   * How claims and settles of many workers share the store (fixed when the store is created; a
   * process that gives it must agree with the store, one that omits it adopts the store's):
   *
   * - `"exact"` (default): one writer at a time under a store-wide lock. The turn order is global
   *   and exact, and every outcome is the one SQLite gives (the numbers of docs/protocol.md,
   *   Scenarios).
   * - `"parallel"`: claims, settles and enqueues of different flows run at the same time under
   *   per-flow row locks (`FOR UPDATE SKIP LOCKED` for claims); turns come from a sequence. Per-flow
   *   order, fencing and no double claim hold as in `"exact"`; the turn order is exact up to the
   *   claims in flight (see docs/postgres.md for the bound).
   */
  readonly claims?: "exact" | "parallel" | undefined
}

/** Errors of opening a queue store. */
export type OpenError = Store.OpenError | PolicyMismatch

const checkOptions = Options.keysOnly<PgRelayQueueOptions>({ ...PgStore.storeKeys, policy: true, retention: true, claims: true })

/** Opens (creating and migrating if needed) a queue store for the lifetime of the scope. */
export const make = (options: PgRelayQueueOptions): Effect.Effect<RelayQueueService, OpenError, Scope.Scope> =>
  Effect.gen(function*() {
    yield* checkOptions(options, "PgRelayQueue.make")
    const requested = yield* QueueSchema.decodePolicy(options.policy, "PgRelayQueue.make")
    const retention = yield* decodeRetention(options.retention, "PgRelayQueue.make")
    const claims = yield* decodeClaims(options.claims, "PgRelayQueue.make")
    const store = yield* PgStore.open(options, PgFunctions.migrations, QueueSchema.migrationsTable, "relay_queue")
    const policy = yield* QueueSchema.resolvePolicy(store, requested, options.policy, name, "create")
    const mode = yield* PgParallel.resolveMode(store, claims, name, "create")
    return RelayQueue.make(backendOf(store, mode), policy, retention)
  })

const name = "PostgreSQL queue store"

/** The queue's backend on a writable store: its hot operations run whole on the server (`PgOperations`). */
const backendOf = (store: PgStore.PgStore, mode: PgParallel.ClaimMode) => ({
  ...(mode === "parallel" ? PgParallel.backend(store, store.rowLockedWrite) : SqlRelayQueue.backend(store)),
  operations: PgOperations.make(store, mode === "parallel")
})

const decodeClaims = (value: unknown, operation: string) =>
  Either.match(PgParallel.decodeMode(value), {
    onLeft: (message) => Effect.fail(new InvalidInput({ operation, message })),
    onRight: Effect.succeed
  })

/** A layer providing `RelayQueue` over a PostgreSQL database. */
export const layer = (options: PgRelayQueueOptions): Layer.Layer<RelayQueue.RelayQueue, OpenError> => Layer.scoped(RelayQueue.RelayQueue, make(options))

/** Like `layer`, reading its options from `Config`. */
export const layerConfig = (
  config: Config.Config.Wrap<PgRelayQueueOptions>
): Layer.Layer<RelayQueue.RelayQueue, OpenError | ConfigError> => Layer.scoped(RelayQueue.RelayQueue, Effect.flatMap(Config.unwrap(config), make))

/** Options of a queue on the application's own PostgreSQL client. */
export interface PgRelayQueueClientOptions extends PgStore.PgClientStoreOptions {
  /** The policy; see `SqliteRelayQueueOptions.policy`. */
  readonly policy?: PolicyInput | undefined
  /** See `PgRelayQueueOptions.retention`. */
  readonly retention?: RetentionInput | undefined
  /**
   * See `PgRelayQueueOptions.claims`; a store created here claims in parallel unless told
   * otherwise (an enqueue inside the application's transaction needs it).
   */
  readonly claims?: "exact" | "parallel" | undefined
}

const checkClientOptions = Options.keysOnly<PgRelayQueueClientOptions>({ ...PgStore.clientStoreKeys, policy: true, retention: true, claims: true })

/**
 * Opens the queue on the application's own PostgreSQL `SqlClient` (from the context): its tables
 * live in the application's database, in the client's search path (own migrations table,
 * `relay_migrations`, applied here), so `enqueue` and `enqueueBatch` inside the application's
 * `sql.withTransaction` commit with the application's rows, or not at all — a transactional
 * outbox. The enqueue locks only its own flows' rows (parallel claims), so it neither waits for
 * nor blocks other flows while the application's transaction is open. Every other operation runs
 * in a transaction of its own and must be called outside the application's (`TransactionMisuse`).
 */
export const makeClient = (
  options: PgRelayQueueClientOptions = {}
): Effect.Effect<RelayQueueService, OpenError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    yield* checkClientOptions(options, "PgRelayQueue.makeClient")
    const requested = yield* QueueSchema.decodePolicy(options.policy, "PgRelayQueue.makeClient")
    const retention = yield* decodeRetention(options.retention, "PgRelayQueue.makeClient")
    const claims = yield* decodeClaims(options.claims, "PgRelayQueue.makeClient")
    const sql = yield* SqlClient.SqlClient
    const store = yield* PgStore.fromClient(sql, options, PgFunctions.migrations, QueueSchema.migrationsTable, "relay_queue")
    const policy = yield* QueueSchema.resolvePolicy(store, requested, options.policy, clientName, "create")
    const mode = yield* PgParallel.resolveMode(store, claims, clientName, "create", "parallel")
    return RelayQueue.make(backendOf(store, mode), policy, retention)
  })

const clientName = "the application's PostgreSQL database"

/** A layer providing `RelayQueue` on the application's own PostgreSQL `SqlClient` (see `makeClient`). */
export const layerClient = (
  options: PgRelayQueueClientOptions = {}
): Layer.Layer<RelayQueue.RelayQueue, OpenError, SqlClient.SqlClient> => Layer.effect(RelayQueue.RelayQueue, makeClient(options))

export { TransactionMisuse } from "./internal/Store.js"

/**
 * Opens an existing queue store read-only for the lifetime of the scope (every transaction is
 * READ ONLY; writes fail with a `SqlError` caused by `ReadonlyStore`): for operators' tools.
 */
export const makeReadonly = (options: PgRelayQueueOptions): Effect.Effect<RelayQueueService, OpenError, Scope.Scope> =>
  Effect.gen(function*() {
    yield* checkOptions(options, "PgRelayQueue.makeReadonly")
    const requested = yield* QueueSchema.decodePolicy(options.policy, "PgRelayQueue.makeReadonly")
    const claims = yield* decodeClaims(options.claims, "PgRelayQueue.makeReadonly")
    const store = yield* PgStore.openReadonly(options, PgFunctions.migrations, QueueSchema.migrationsTable, "relay_queue")
    const policy = yield* QueueSchema.resolvePolicy(store, requested, options.policy, name, "readonly")
    const mode = yield* PgParallel.resolveMode(store, claims, name, "readonly")
    return RelayQueue.make(mode === "parallel" ? PgParallel.backend(store) : SqlRelayQueue.backend(store), policy)
  })
