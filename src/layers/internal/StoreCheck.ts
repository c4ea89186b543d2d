/**
 * One answer to "is this our store, and which version", for every backend and the CLI: `inspect`
 * reads what a database holds (`Empty | Foreign | Version(n)`) and `refuse` turns contents this
 * build must not open into an `IncompatibleStore`, in one place.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { Data, Effect, Schema } from "effect"
import { IncompatibleStore } from "../../domain/Errors.js"

/** What a database holds, as far as one kind of store (named by its migrations table) is concerned. */
export type Contents = Data.TaggedEnum<{
  /** No table at all: a new store. */
  Empty: {}
  /** Tables, but not this kind of store's migrations table (another application, another kind of store). */
  Foreign: { readonly tables: ReadonlyArray<string> }
  /** This kind of store, at schema `version` (its highest applied migration; 0 when none is recorded). */
  Version: { readonly version: number }
}>

/** Constructors and `$match` of `Contents`. */
export const Contents = Data.taggedEnum<Contents>()

/** The migrations table of the queue store and of the receiver (inbox) store, by kind. */
export const MigrationsTables = { queue: "relay_migrations", receiver: "inbox_migrations" } as const

/** The kind of fair-relay store that a set of tables is, if any. */
export const kindOf = (tables: ReadonlyArray<string>): keyof typeof MigrationsTables | undefined =>
  tables.includes(MigrationsTables.queue) ? "queue" : tables.includes(MigrationsTables.receiver) ? "receiver" : undefined

/** The highest migration id a set of migrations ("<id>_<name>") brings a store to. */
export const latestMigration = (migrations: Record<string, unknown>): number =>
  Math.max(0, ...Object.keys(migrations).map((key) => Number.parseInt(key, 10)))

/** What a database holds, from its tables; `version` reads the migrations table, which it has. */
export const classify = (tables: ReadonlyArray<string>, migrationsTable: string, version: () => number): Contents =>
  tables.length === 0
    ? Contents.Empty()
    : tables.includes(migrationsTable)
    ? Contents.Version({ version: version() })
    : Contents.Foreign({ tables })

/** SQLite's tables, ours and the application's, by name. */
export const sqliteTables = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"

/**
 * Reads a database's contents through an open client (SQLite, or PostgreSQL's current schema).
 * Only reads: safe inside a write transaction and on a read-only connection.
 */
export const inspect = (sql: SqlClient.SqlClient, migrationsTable: string): Effect.Effect<Contents, SqlError> =>
  Effect.gen(function*() {
    const rows = yield* sql.onDialectOrElse({
      pg: () =>
        sql<{ readonly name: string }>`SELECT table_name AS name FROM information_schema.tables
          WHERE table_schema = current_schema() ORDER BY table_name`,
      orElse: () => sql.unsafe<{ readonly name: string }>(sqliteTables)
    })
    const tables = rows.map((row) => row.name)
    if (!tables.includes(migrationsTable)) return classify(tables, migrationsTable, () => 0)
    const [row] = yield* sql<{ readonly version: unknown }>`SELECT MAX(migration_id) AS version FROM ${sql(migrationsTable)}`
    return Contents.Version({ version: Number(row?.version ?? 0) })
  })

/** How `refuse` treats a database that holds other tables. */
export interface RefuseOptions {
  /**
   * `"refuse"` (SQLite: a file is one store) or `"allow"` (PostgreSQL: a schema is shared with the
   * application's own tables and the other kind of store).
   */
  readonly foreign: "refuse" | "allow"
}

/**
 * Refuses contents this build must not open as `migrationsTable`'s kind of store at schema
 * `latest`: another kind of database, or a newer schema. Passes the contents on otherwise.
 */
export const refuse = (store: string, migrationsTable: string, latest: number, options: RefuseOptions = { foreign: "refuse" }) =>
(contents: Contents): Effect.Effect<Contents, IncompatibleStore> => {
  const incompatible = (message: string) => Effect.fail(new IncompatibleStore({ store, message }))
  return Contents.$match(contents, {
    Empty: () => Effect.succeed(contents),
    Foreign: ({ tables }) => {
      if (options.foreign === "allow") return Effect.succeed(contents)
      const shown = `${tables.slice(0, 5).join(", ")}${tables.length > 5 ? ", …" : ""}`
      return incompatible(`${store} is not a store of this kind: it has tables (${shown}) but no ${migrationsTable}`)
    },
    Version: ({ version }) =>
      version > latest
        ? incompatible(`${store} was written by a newer version of fair-relay (schema ${version}; this one knows up to ${latest})`)
        : Effect.succeed(contents)
  })
}

/**
 * Refuses contents a read-only open cannot read: anything but this kind of store at schema
 * `latest` (`missing`: why there is none to read).
 */
export const readable = (store: string, latest: number, missing: string) => (contents: Contents): Effect.Effect<void, IncompatibleStore> =>
  contents._tag === "Version" && contents.version === latest ? Effect.void : Effect.fail(
    new IncompatibleStore({
      store,
      message: contents._tag === "Version"
        ? `${store} has an older schema (${contents.version}; this version of fair-relay writes ${latest}): open it for writing once to upgrade it`
        : missing
    })
  )

/** Why a write was refused: the store was opened read-only (`SqliteStore.openReadonly`). */
export class ReadonlyStore extends Schema.TaggedError<ReadonlyStore>()("ReadonlyStore", {
  store: Schema.String,
  message: Schema.String
}) {}

/**
 * The write transaction of a read-only store: fails with a `SqlError` whose cause is a
 * `ReadonlyStore`, without running anything (a store's `write` may fail only with `SqlError`).
 */
export const refuseWrite = (store: string) => <A, E, R>(_effect: Effect.Effect<A, E, R>): Effect.Effect<A, E | SqlError, R> =>
  Effect.fail(
    new SqlError({
      cause: new ReadonlyStore({ store, message: `${store} is open read-only` }),
      message: `cannot write: ${store} is open read-only`
    })
  )
