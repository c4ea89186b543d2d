/**
 * Opening the queue store for the operator CLI. Opening a SQLite path creates the file and the
 * library's open runs migrations, so before anything opens it for writing the CLI checks, through
 * a read-only connection, that the path is a fair-relay queue store of a schema this build knows.
 * Read commands never open it for writing at all: they run the library's queries over that
 * read-only connection (no migration, no write lock, no way to change the file).
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import type { SqlError } from "@effect/sql/SqlError"
import { Cause, Effect } from "effect"
import type { Scope } from "effect"
import * as fs from "node:fs"
import { defaultPolicy } from "../domain/Policy.js"
import type { PolicyInput } from "../domain/Policy.js"
import * as SqlRelayQueue from "../layers/internal/SqlRelayQueue.js"
import type { Store } from "../layers/internal/Store.js"
import * as SqliteRelayQueue from "../layers/SqliteRelayQueue.js"
import type { RelayQueueService } from "../services/RelayQueue.js"
import { failure, usage } from "./Errors.js"
import type { CliFailure } from "./Errors.js"

/** The queue schema version this build writes: the highest migration id it knows. */
export const SchemaVersion: number = Math.max(...Object.keys(SqlRelayQueue.migrations).map((key) => Number.parseInt(key, 10)))

const sqliteHeader = "SQLite format 3\u0000"

// Tables every queue store has, whatever its version.
const queueTables = ["relay_clock", "relay_flow", "relay_event", "relay_audit"]

const quoted = (file: string) => JSON.stringify(file)

/** Checks the path itself before SQLite sees it: it exists, is a file, and starts like a SQLite database. */
const checkFile = (file: string, kind = "queue"): Effect.Effect<void, CliFailure> =>
  Effect.suspend(() => {
    let stat: fs.Stats
    try {
      stat = fs.statSync(file)
    } catch {
      return Effect.fail(failure("StoreNotFound", `no ${kind} store at ${quoted(file)}: the file does not exist`))
    }
    if (!stat.isFile()) return Effect.fail(failure("NotAQueueStore", `${quoted(file)} is not a file`))
    if (stat.size === 0) return Effect.fail(failure("NotAQueueStore", `${quoted(file)} is empty, not a fair-relay ${kind} store`))
    const header = Buffer.alloc(sqliteHeader.length)
    let read = 0
    try {
      const fd = fs.openSync(file, "r")
      try {
        read = fs.readSync(fd, header, 0, header.length, 0)
      } finally {
        fs.closeSync(fd)
      }
    } catch (cause) {
      return Effect.fail(failure("StoreUnreadable", `cannot read ${quoted(file)}: ${cause instanceof Error ? cause.message : String(cause)}`))
    }
    return read === header.length && header.toString("latin1") === sqliteHeader
      ? Effect.void
      : Effect.fail(failure("NotAQueueStore", `${quoted(file)} is not a SQLite database, so not a fair-relay ${kind} store`))
  })

const unreadable = (file: string) => (cause: unknown) =>
  failure("StoreUnreadable", `cannot read ${quoted(file)}: ${Cause.isCause(cause) ? Cause.pretty(cause) : cause instanceof Error ? `${cause.message}${cause.cause instanceof Error ? `: ${cause.cause.message}` : ""}` : String(cause)}`)

/** A read-only SQLite connection (SQLITE_OPEN_READONLY: cannot create or write the file). */
const openReadonly = (file: string): Effect.Effect<SqliteClient.SqliteClient, CliFailure, Scope.Scope> =>
  SqliteClient.make({ filename: file, readonly: true, disableWAL: true }).pipe(
    Effect.provide(Reactivity.layer),
    Effect.catchAllDefect((defect) => Effect.fail(unreadable(file)(defect))),
    Effect.tap((sql) => Effect.mapError(sql.unsafe("PRAGMA busy_timeout = 2000"), unreadable(file)))
  )

/** How the store's schema compares with this build's. */
export type SchemaCheck = "current" | "older"

/**
 * Reads the store's tables and migration version; fails unless it is a queue store this build
 * can open (an older version is reported, for the caller to decide).
 */
const checkSchema = (file: string, sql: SqliteClient.SqliteClient): Effect.Effect<SchemaCheck, CliFailure> =>
  Effect.gen(function*() {
    const tables = new Set(
      (yield* sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table'`).map((row) => row.name)
    )
    if (!tables.has(SqlRelayQueue.migrationsTable)) {
      return yield* tables.has("inbox_migrations")
        ? failure("NotAQueueStore", `${quoted(file)} is a fair-relay receiver (inbox) store, not a queue store`)
        : failure("NotAQueueStore", `${quoted(file)} is a SQLite database but not a fair-relay queue store (it has no ${SqlRelayQueue.migrationsTable} table)`)
    }
    const missing = queueTables.filter((table) => !tables.has(table))
    if (missing.length > 0) {
      return yield* failure("NotAQueueStore", `${quoted(file)} is not a complete fair-relay queue store (missing ${missing.join(", ")})`)
    }
    const [row] = yield* sql<{ version: unknown }>`SELECT MAX(migration_id) AS version FROM ${sql(SqlRelayQueue.migrationsTable)}`
    const version = Number(row?.version ?? 0)
    if (version > SchemaVersion) {
      return yield* failure(
        "UnsupportedSchema",
        `${quoted(file)} was written by a newer fair-relay (queue schema ${version}; this one knows up to ${SchemaVersion})`
      )
    }
    return version === SchemaVersion ? "current" : "older"
  }).pipe(Effect.catchTag("SqlError", (error) => {
    const code = (error.cause as { readonly code?: unknown } | undefined)?.code
    return Effect.fail(
      code === "SQLITE_NOTADB" || code === "SQLITE_CORRUPT"
        ? failure("NotAQueueStore", `${quoted(file)} is not a readable SQLite database, so not a fair-relay queue store`)
        : unreadable(file)(error)
    )
  }))

/** Checks that `file` is a queue store this build can open, touching nothing. */
export const check = (file: string): Effect.Effect<SchemaCheck, CliFailure> =>
  Effect.scoped(Effect.zipRight(checkFile(file), Effect.flatMap(openReadonly(file), (sql) => checkSchema(file, sql))))

/** A queue store opened read-only. */
export interface Reader {
  /** The library's queue over the read-only connection: its reads work, its writes fail (SQLITE_READONLY). */
  readonly queue: RelayQueueService
  /** Runs several reads in one read transaction, so they see one state of the store. */
  readonly consistent: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E | SqlError, R>
}

/** Opens an existing queue store read-only for the lifetime of the scope. */
export const openReader = (file: string): Effect.Effect<Reader, CliFailure, Scope.Scope> =>
  Effect.gen(function*() {
    yield* checkFile(file)
    const sql = yield* openReadonly(file)
    const schema = yield* checkSchema(file, sql)
    if (schema === "older") {
      return yield* failure(
        "UnsupportedSchema",
        `${quoted(file)} has an older queue schema (this fair-relay writes ${SchemaVersion}); a writing command (enqueue, redrive, run) upgrades it`
      )
    }
    // Nested inside `consistent`, the queue's own read transactions become savepoints of it.
    const transaction = <A, E, R>(effect: Effect.Effect<A, E, R>) => sql.withTransaction(effect)
    const store: Store = { sql, read: transaction, write: transaction }
    return { queue: SqlRelayQueue.make(store, defaultPolicy), consistent: transaction }
  })

/**
 * Checks that an existing receiver file of the sample receiver is a fair-relay receiver store (a
 * missing one is created by the receiver's open; any other file would be written into).
 */
export const checkInbox = (file: string): Effect.Effect<void, CliFailure> =>
  fs.existsSync(file)
    ? Effect.scoped(Effect.gen(function*() {
      yield* checkFile(file, "receiver")
      const sql = yield* openReadonly(file)
      const tables = yield* Effect.mapError(
        sql<{ name: string }>`SELECT name FROM sqlite_master WHERE type = 'table'`,
        () => failure("NotAReceiverStore", `${quoted(file)} is not a readable SQLite database, so not a fair-relay receiver store`)
      )
      const names = new Set(tables.map((row) => row.name))
      if (names.has("inbox_migrations")) return
      return yield* names.has(SqlRelayQueue.migrationsTable)
        ? failure("NotAReceiverStore", `${quoted(file)} is a fair-relay queue store, not a receiver store`)
        : failure("NotAReceiverStore", `${quoted(file)} is a SQLite database but not a fair-relay receiver store`)
    }))
    : Effect.void

/** Options of a writing open. */
export interface WriterOptions {
  /** Create the store when the file does not exist (otherwise a missing file is an error). */
  readonly create?: boolean | undefined
  readonly policy?: PolicyInput | undefined
}

/**
 * Opens a queue store for writing for the lifetime of the scope, after checking it (an older
 * schema is migrated by the library's open). Creates it only when asked to and the path is free.
 */
export const openWriter = (file: string, options: WriterOptions = {}): Effect.Effect<RelayQueueService, CliFailure, Scope.Scope> =>
  Effect.gen(function*() {
    if (!(options.create === true && !fs.existsSync(file))) yield* check(file)
    return yield* SqliteRelayQueue.make({ filename: file, policy: options.policy }).pipe(
      Effect.mapError((error) =>
        error._tag === "InvalidInput"
          ? usage("InvalidOption", error.message)
          : failure(error._tag, `cannot open ${quoted(file)}: ${error.message}`)
      )
    )
  })
