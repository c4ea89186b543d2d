/**
 * The backends the model-based test runs against. A backend gives each chunk of sequences an
 * opener of fresh queue stores: SQLite opens a new `:memory:` database per sequence; PostgreSQL
 * uses one fresh schema per chunk, put back to the freshly migrated state before each sequence
 * (TRUNCATE … RESTART IDENTITY and the migrations' rows) instead of being migrated again.
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import type { PolicyInput } from "../../src/domain/Policy.js"
import * as PgFunctions from "../../src/layers/internal/PgFunctions.js"
import * as PgStore from "../../src/layers/internal/PgStore.js"
import * as QueueSchema from "../../src/layers/internal/QueueSchema.js"
import * as PgRelayQueue from "../../src/layers/PgRelayQueue.js"
import * as SqliteRelayQueue from "../../src/layers/SqliteRelayQueue.js"
import type { RelayQueueService } from "../../src/services/RelayQueue.js"
import { resettablePgSchema } from "../support/backends.js"

/** Opens a queue store as a fresh one, with the given policy, for the scope. */
export type OpenQueue = (policy: PolicyInput) => Effect.Effect<RelayQueueService, unknown, Scope.Scope>

/** One backend of the model-based test. */
export interface ModelBackend {
  readonly name: "sqlite" | "postgres" | "postgres-parallel"
  /** What one chunk of sequences opens its stores with (resources live as long as the scope). */
  readonly chunk: Effect.Effect<OpenQueue, unknown, Scope.Scope>
}

/** A fresh `:memory:` SQLite queue per sequence. */
export const sqliteMemory: OpenQueue = (policy) => SqliteRelayQueue.make({ filename: ":memory:", policy })

/** SQLite: a new in-memory database per sequence. */
export const sqlite: ModelBackend = { name: "sqlite", chunk: Effect.succeed(sqliteMemory) }


/**
 * A PostgreSQL schema holding only the queue store's migrations (not opened by a queue, so no
 * open-time state), resettable to that state.
 */
export const pgQueueSchema = (url: string) =>
  resettablePgSchema(
    url,
    QueueSchema.migrationsTable,
    (schemaUrl) => PgStore.open({ url: schemaUrl, maxConnections: 1 }, PgFunctions.migrations, QueueSchema.migrationsTable, "relay_queue")
  )

/** PostgreSQL (exact or parallel claims): one fresh schema per chunk, reset before each sequence. */
export const postgres = (url: string, claims: "exact" | "parallel" = "exact"): ModelBackend => ({
  name: claims === "exact" ? "postgres" : "postgres-parallel",
  chunk: Effect.map(pgQueueSchema(url), (schema): OpenQueue => (policy) =>
    Effect.zipRight(schema.reset, PgRelayQueue.make({ url: schema.url, policy, maxConnections: 1, claims })))
})
