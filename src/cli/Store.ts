/**
 * Opening the queue store for the operator CLI: a SQLite file, or a PostgreSQL database when
 * `--db` is a `postgres://` URL. Before anything opens a SQLite path for writing (which would
 * create it, or add tables to another application's database) the CLI asks the library's one
 * store check (`SqliteStore.inspectFile`) what the file holds. Read commands open the store
 * read-only (`SqliteRelayQueue.makeReadonly`): no migration, no write lock, no way to change it.
 */
import { Config, Effect, Predicate } from "effect"
import type { Scope } from "effect"
import * as fs from "node:fs"
import type { PolicyInput } from "../domain/Policy.js"
import * as QueueSchema from "../layers/internal/QueueSchema.js"
import * as SqliteStore from "../layers/internal/SqliteStore.js"
import * as StoreCheck from "../layers/internal/StoreCheck.js"
import * as PgRelayQueue from "../layers/PgRelayQueue.js"
import * as SqliteRelayQueue from "../layers/SqliteRelayQueue.js"
import type { RelayQueueService } from "../services/RelayQueue.js"
import { failure, usage } from "./Errors.js"
import type { CliFailure } from "./Errors.js"

/** The queue schema version this build writes: the highest migration id it knows. */
export const SchemaVersion: number = StoreCheck.latestMigration(QueueSchema.migrations)

/**
 * Accepted for older deployments and without effect, as `PgStoreOptions.preparedStatements`: the
 * PostgreSQL store names no prepared statement. A value other than true or false is refused.
 */
export const PreparedStatementsEnv = "FAIR_RELAY_PG_PREPARED_STATEMENTS"

/** `$FAIR_RELAY_PG_PREPARED_STATEMENTS`, or a usage error naming it. */
const preparedStatements: Effect.Effect<boolean, CliFailure> = Effect.catchAll(
  Config.boolean(PreparedStatementsEnv).pipe(Config.withDefault(true)),
  () => Effect.fail(usage("BadEnvironment", `${PreparedStatementsEnv} must be true or false`))
)

/** Whether `--db` names a PostgreSQL database rather than a SQLite file. */
export const isPostgres = (db: string): boolean => /^postgres(ql)?:\/\//i.test(db)

/**
 * The store as the CLI may print it: a path as is, a PostgreSQL URL with its password (in the
 * user part or a `password` parameter) replaced by `***` — never the secret itself.
 */
export const masked = (db: string): string => {
  if (!isPostgres(db)) return db
  try {
    const url = new URL(db)
    if (url.password !== "") url.password = "***"
    for (const key of [...url.searchParams.keys()]) {
      if (key.toLowerCase() === "password") url.searchParams.set(key, "***")
    }
    return url.toString()
  } catch {
    return "the PostgreSQL URL given"
  }
}

/** How a store is named in messages: a quoted path, or the URL without its password (`masked`). */
export const display = (db: string): string => (isPostgres(db) ? masked(db) : JSON.stringify(db))

// The sslmodes pg 8 reads as verify-full, announcing it in a process warning of many lines.
const verifyFullAliases = new Set(["prefer", "require", "verify-ca"])

/**
 * The URL handed to `pg`: as given, except an `sslmode` pg 8 treats as `verify-full` anyway
 * (prefer, require, verify-ca; unless `uselibpqcompat` asks for libpq's meaning) is written as
 * `verify-full`. The connection is the same one; pg then has nothing to warn about, and the CLI's
 * stderr keeps its one line per failure.
 */
export const pgUrl = (db: string): string => {
  let url: URL
  try {
    url = new URL(db)
  } catch {
    return db
  }
  const mode = url.searchParams.get("sslmode")
  if (mode === null || !verifyFullAliases.has(mode) || url.searchParams.has("uselibpqcompat")) return db
  url.searchParams.set("sslmode", "verify-full")
  return url.toString()
}

const sqliteHeader = "SQLite format 3\u0000"

/** Checks the path itself before SQLite sees it: it exists, is a file, and starts like a SQLite database. */
const checkFile = (file: string, kind = "queue"): Effect.Effect<void, CliFailure> =>
  Effect.suspend(() => {
    const shown = display(file)
    let stat: fs.Stats
    try {
      stat = fs.statSync(file)
    } catch {
      return Effect.fail(failure("StoreNotFound", `no ${kind} store at ${shown}: the file does not exist`))
    }
    if (!stat.isFile()) return Effect.fail(failure("NotAQueueStore", `${shown} is not a file`))
    if (stat.size === 0) return Effect.fail(failure("NotAQueueStore", `${shown} is empty, not a fair-relay ${kind} store`))
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
      return Effect.fail(failure("StoreUnreadable", `cannot read ${shown}: ${cause instanceof Error ? cause.message : String(cause)}`))
    }
    return read === header.length && header.toString("latin1") === sqliteHeader
      ? Effect.void
      : Effect.fail(failure("NotAQueueStore", `${shown} is not a SQLite database, so not a fair-relay ${kind} store`))
  })

/** How the store's schema compares with this build's. */
export type SchemaCheck = "current" | "older"

/** The store check's answer about a SQLite file, as the CLI words it. */
const inspectQueueFile = (file: string): Effect.Effect<SchemaCheck, CliFailure> =>
  SqliteStore.inspectFile(file, StoreCheck.MigrationsTables.queue).pipe(
    Effect.mapError((error) => {
      const code = Predicate.hasProperty(error.cause, "code") ? error.cause.code : undefined
      return code === "SQLITE_NOTADB" || code === "SQLITE_CORRUPT"
        ? failure("NotAQueueStore", `${display(file)} is not a readable SQLite database, so not a fair-relay queue store`)
        : failure("StoreUnreadable", `cannot read ${display(file)}: ${error.cause instanceof Error ? error.cause.message : error.message}`)
    }),
    Effect.flatMap(StoreCheck.Contents.$match({
      Empty: () =>
        failure(
          "NotAQueueStore",
          `${display(file)} is a SQLite database but not a fair-relay queue store (it has no ${StoreCheck.MigrationsTables.queue} table)`
        ),
      Foreign: ({ tables }) =>
        StoreCheck.kindOf(tables) === "receiver"
          ? failure("NotAQueueStore", `${display(file)} is a fair-relay receiver (inbox) store, not a queue store`)
          : failure(
            "NotAQueueStore",
            `${display(file)} is a SQLite database but not a fair-relay queue store (it has no ${StoreCheck.MigrationsTables.queue} table)`
          ),
      Version: ({ version }) =>
        version > SchemaVersion
          ? failure(
            "UnsupportedSchema",
            `${display(file)} was written by a newer fair-relay (queue schema ${version}; this one knows up to ${SchemaVersion})`
          )
          : Effect.succeed<SchemaCheck>(version === SchemaVersion ? "current" : "older")
    }))
  )

/**
 * Checks that `db` is a queue store this build can open, touching nothing. A PostgreSQL store is
 * checked by the library's own open (inside its first transaction).
 */
export const check = (db: string): Effect.Effect<SchemaCheck, CliFailure> =>
  isPostgres(db) ? Effect.succeed("current") : Effect.zipRight(checkFile(db), inspectQueueFile(db))

/** A library error on opening, as the CLI reports it (the server's or driver's reason kept). */
const openFailure = (db: string) => (error: SqliteRelayQueue.OpenError): CliFailure =>
  error._tag === "InvalidInput"
    ? usage("InvalidOption", error.message)
    : failure(error._tag, `cannot open ${display(db)}: ${error.message}${causeText(error)}`)

const causeText = (error: unknown): string => {
  const cause = Predicate.hasProperty(error, "cause") ? error.cause : undefined
  const message = cause instanceof Error ? cause.message : undefined
  return message === undefined || String(Predicate.hasProperty(error, "message") ? error.message : undefined).includes(message) ? "" : `: ${message}`
}

/** Opens an existing queue store read-only for the lifetime of the scope. */
export const openReader = (db: string): Effect.Effect<RelayQueueService, CliFailure, Scope.Scope> =>
  isPostgres(db)
    ? Effect.flatMap(preparedStatements, (prepared) =>
      Effect.mapError(PgRelayQueue.makeReadonly({ url: pgUrl(db), preparedStatements: prepared }), openFailure(db)))
    : Effect.gen(function*() {
      const schema = yield* check(db)
      if (schema === "older") {
        return yield* failure(
          "UnsupportedSchema",
          `${display(db)} has an older queue schema (this fair-relay writes ${SchemaVersion}); a writing command (enqueue, redrive, run) upgrades it`
        )
      }
      return yield* Effect.mapError(SqliteRelayQueue.makeReadonly({ filename: db }), openFailure(db))
    })

/**
 * Checks that an existing receiver file of the sample receiver is a fair-relay receiver store (a
 * missing one is created by the receiver's open; any other file would be written into).
 */
export const checkInbox = (file: string): Effect.Effect<void, CliFailure> =>
  fs.existsSync(file)
    ? Effect.zipRight(
      checkFile(file, "receiver"),
      SqliteStore.inspectFile(file, StoreCheck.MigrationsTables.receiver).pipe(
        Effect.mapError(() =>
          failure("NotAReceiverStore", `${display(file)} is not a readable SQLite database, so not a fair-relay receiver store`)
        ),
        Effect.flatMap((contents) =>
          contents._tag === "Version"
            ? Effect.void
            : contents._tag === "Foreign" && StoreCheck.kindOf(contents.tables) === "queue"
            ? failure("NotAReceiverStore", `${display(file)} is a fair-relay queue store, not a receiver store`)
            : failure("NotAReceiverStore", `${display(file)} is a SQLite database but not a fair-relay receiver store`)
        )
      )
    )
    : Effect.void

/** Options of a writing open. */
export interface WriterOptions {
  /** Create the store when the file does not exist (otherwise a missing file is an error). */
  readonly create?: boolean | undefined
  /** Protocol settings given on the command line (the store's own are adopted otherwise). */
  readonly policy?: PolicyInput | undefined
}

/**
 * Opens a queue store for writing for the lifetime of the scope, after checking it (an older
 * schema is migrated by the library's open). Creates a SQLite file only when asked to and the
 * path is free; on PostgreSQL the database must exist, and the library creates its tables.
 */
export const openWriter = (db: string, options: WriterOptions = {}): Effect.Effect<RelayQueueService, CliFailure, Scope.Scope> =>
  isPostgres(db)
    ? Effect.flatMap(preparedStatements, (prepared) =>
      Effect.mapError(PgRelayQueue.make({ url: pgUrl(db), policy: options.policy, preparedStatements: prepared }), openFailure(db)))
    : Effect.gen(function*() {
      if (!(options.create === true && !fs.existsSync(db))) yield* check(db)
      return yield* Effect.mapError(SqliteRelayQueue.make({ filename: db, policy: options.policy }), openFailure(db))
    })
