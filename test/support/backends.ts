/**
 * The backends the contract suite runs against: SQLite always; PostgreSQL, with exact and with parallel claims, when
 * FAIR_RELAY_PG_URL names a database (`.ci/run` sets it). Each world gets fresh stores: temp
 * files for SQLite, fresh schemas for PostgreSQL.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import Database from "better-sqlite3"
import { Effect, Redacted } from "effect"
import { describe } from "vitest"
import type { Scope } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import * as PgInbox from "../../src/layers/PgInbox.js"
import * as PgRelayQueue from "../../src/layers/PgRelayQueue.js"
import { makeWorld, sqliteStores } from "../../scenarios/World.js"
import type { World, WorldOptions } from "../../scenarios/World.js"
import { testTmpDir } from "./tmp.js"

/** Which store a fault goes into. */
export type Target = "queue" | "inbox"

/** A world plus a way to make inserts into one of its tables fail (a database trigger). */
export interface BackendWorld extends World {
  readonly rejectInserts: (target: Target, table: string) => Effect.Effect<void, unknown>
}

/** One backend of the contract suite. */
export interface Backend {
  readonly name: string
  readonly world: (options?: Omit<WorldOptions, "stores" | "queueFile" | "inboxFile">) => Effect.Effect<BackendWorld, unknown, Scope.Scope>
}

/** A temporary directory removed with the scope. */
export const tempDir = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(testTmpDir(), "fair-relay-test-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

const sqlite: Backend = {
  name: "sqlite",
  world: (options) =>
    Effect.gen(function*() {
      const dir = yield* tempDir
      const files = { queue: path.join(dir, "queue.db"), inbox: path.join(dir, "inbox.db") }
      const world = yield* makeWorld({ ...options, stores: sqliteStores(files.queue, files.inbox) })
      const rejectInserts = (target: Target, table: string) =>
        Effect.sync(() => {
          const db = new Database(files[target])
          db.exec(`CREATE TRIGGER reject_${table} BEFORE INSERT ON ${table} BEGIN SELECT RAISE(ABORT, 'injected failure'); END`)
          db.close()
        })
      return { ...world, rejectInserts }
    })
}

/** The PostgreSQL test database, if configured. */
export const pgUrl = process.env.FAIR_RELAY_PG_URL

/** A URL whose connections use `schema` as their search path. */
export const withSchema = (url: string, schema: string): string => {
  const u = new URL(url)
  u.searchParams.set("options", `-c search_path=${schema}`)
  return u.toString()
}

let schemas = 0

/** A fresh schema, dropped with the scope. */
export const freshSchema = (url: string) =>
  Effect.gen(function*() {
    const admin = yield* PgClient.make({ url: Redacted.make(url), maxConnections: 1 }).pipe(Effect.provide(Reactivity.layer))
    const name = `t_${process.pid}_${Date.now().toString(36)}_${schemas++}`
    yield* Effect.acquireRelease(admin`CREATE SCHEMA ${admin(name)}`, () => Effect.orDie(admin`DROP SCHEMA ${admin(name)} CASCADE`))
    return { name, url: withSchema(url, name), admin }
  })

/** Every table (but the migrations table) and sequence of a schema, as data: what a reset restores. */
export interface SchemaContents {
  readonly tables: Readonly<Record<string, ReadonlyArray<unknown>>>
  readonly sequences: Readonly<Record<string, { readonly lastValue: string; readonly isCalled: boolean }>>
}

const quote = (name: string) => `"${name.replace(/"/g, '""')}"`

/**
 * The contents of the schema `sql` is connected to (its search path): the rows of every table
 * except `migrationsTable`, ordered, and the state of every sequence.
 */
export const schemaContents = (sql: PgClient.PgClient, migrationsTable: string) =>
  Effect.gen(function*() {
    const tableRows = yield* sql<{ readonly name: string }>`SELECT table_name AS name FROM information_schema.tables
      WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' AND table_name <> ${migrationsTable} ORDER BY 1`
    const tables: Record<string, ReadonlyArray<unknown>> = {}
    for (const { name } of tableRows) {
      const [row] = yield* sql.unsafe<{ readonly rows: unknown }>(
        `SELECT coalesce(json_agg(t ORDER BY t::text), '[]'::json) AS rows FROM ${quote(name)} t`
      )
      tables[name] = (typeof row?.rows === "string" ? JSON.parse(row.rows) : row?.rows) as ReadonlyArray<unknown>
    }
    const sequenceRows = yield* sql<{ readonly name: string }>`SELECT sequence_name AS name FROM information_schema.sequences
      WHERE sequence_schema = current_schema() ORDER BY 1`
    const sequences: Record<string, { lastValue: string; isCalled: boolean }> = {}
    for (const { name } of sequenceRows) {
      const [row] = yield* sql.unsafe<{ readonly last_value: unknown; readonly is_called: boolean }>(
        `SELECT last_value, is_called FROM ${quote(name)}`
      )
      sequences[name] = { lastValue: String(row?.last_value), isCalled: row?.is_called === true }
    }
    return { tables, sequences } satisfies SchemaContents
  })

/**
 * A fresh schema holding a freshly migrated store (`migrate` runs the store's migrations and
 * nothing else) that can be put back to exactly that state between runs, much faster than a new
 * schema: `reset` empties every table but the migrations table, re-inserts the rows the
 * migrations wrote (the clock row) and puts every sequence back where it was (what TRUNCATE …
 * RESTART IDENTITY does; DELETE is several times cheaper than TRUNCATE on tables this small). `url`
 * connects to the schema; `contents` reads what it holds now, to compare with `fresh`.
 */
export const resettablePgSchema = (
  url: string,
  migrationsTable: string,
  migrate: (url: string) => Effect.Effect<unknown, unknown, Scope.Scope>
) =>
  Effect.gen(function*() {
    const schema = yield* freshSchema(url)
    yield* Effect.scoped(migrate(schema.url))
    const sql = yield* PgClient.make({ url: Redacted.make(schema.url), maxConnections: 1 }).pipe(Effect.provide(Reactivity.layer))
    const fresh = yield* schemaContents(sql, migrationsTable)
    const reset = sql.withTransaction(
      Effect.gen(function*() {
        for (const name of Object.keys(fresh.tables)) yield* sql.unsafe(`DELETE FROM ${quote(name)}`)
        for (const [name, rows] of Object.entries(fresh.tables)) {
          if (rows.length === 0) continue
          yield* sql.unsafe(`INSERT INTO ${quote(name)} SELECT * FROM json_populate_recordset(NULL::${quote(name)}, $1::json)`, [
            JSON.stringify(rows)
          ])
        }
        for (const [name, { isCalled, lastValue }] of Object.entries(fresh.sequences)) {
          yield* sql`SELECT setval(${quote(name)}::regclass, ${lastValue}::bigint, ${isCalled})`
        }
      })
    )
    return { url: schema.url, name: schema.name, fresh, reset, contents: schemaContents(sql, migrationsTable) }
  })

const postgres = (url: string, claims: "exact" | "parallel"): Backend => ({
  name: claims === "exact" ? "postgres" : "postgres-parallel",
  world: (options) =>
    Effect.gen(function*() {
      const queue = yield* freshSchema(url)
      const inbox = yield* freshSchema(url)
      const world = yield* makeWorld({
        ...options,
        stores: {
          queue: (policy) => PgRelayQueue.make({ url: queue.url, policy, maxConnections: 2, claims }),
          inbox: (business) => PgInbox.make({ url: inbox.url, business, maxConnections: 2 })
        }
      })
      const rejectInserts = (target: Target, table: string) => {
        const { admin, name } = target === "queue" ? queue : inbox
        return Effect.gen(function*() {
          yield* admin.unsafe(`CREATE FUNCTION "${name}".reject_insert() RETURNS trigger LANGUAGE plpgsql AS
            $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$`)
          yield* admin.unsafe(`CREATE TRIGGER reject_${table} BEFORE INSERT ON "${name}".${table}
            FOR EACH ROW EXECUTE FUNCTION "${name}".reject_insert()`)
        })
      }
      return { ...world, rejectInserts }
    })
})

if (pgUrl === undefined) {
  console.warn("\n*** FAIR_RELAY_PG_URL is not set: the PostgreSQL backend of the contract suite is SKIPPED ***\n")
}

/** Every backend configured here. */
export const backends: ReadonlyArray<Backend> = pgUrl === undefined
  ? [sqlite]
  : [sqlite, postgres(pgUrl, "exact"), postgres(pgUrl, "parallel")]

/** The PostgreSQL backends when FAIR_RELAY_PG_URL is not set: a world of one fails (their suites are only listed, skipped). */
export const unconfiguredBackends: ReadonlyArray<Backend> = pgUrl === undefined
  ? ["postgres", "postgres-parallel"].map((name) => ({ name, world: () => Effect.dieMessage(`${name}: FAIR_RELAY_PG_URL is not set`) }))
  : []

/**
 * Lists `suite`'s tests as skipped under each unconfigured backend of `among` (all of them by
 * default), the reason in the suite's name: the report shows what did not run, test by test.
 */
export const describeSkipped = (suite: (backend: Backend) => void, among: ReadonlyArray<string> = ["postgres", "postgres-parallel"]): void => {
  for (const backend of unconfiguredBackends.filter((b) => among.includes(b.name))) {
    describe.skip(`${backend.name} [SKIPPED: FAIR_RELAY_PG_URL is not set]`, () => suite(backend))
  }
}

/** The backends that are not configured here, by name, so suites can report them as skipped. */
export const skippedBackends: ReadonlyArray<string> = pgUrl === undefined
  ? ["postgres (set FAIR_RELAY_PG_URL)", "postgres-parallel (set FAIR_RELAY_PG_URL)"]
  : []

/**
 * The backends with distinct receiver stores, for tests of the receiver alone: postgres-parallel's
 * is the same PgInbox as postgres's (claim modes are a queue setting), so the receiver runs once
 * per store: SQLite and PostgreSQL.
 */
export const receiverBackends: ReadonlyArray<Backend> = backends.filter((backend) =>
  backend.name === "sqlite" || backend.name === "postgres"
)

/** Whether `backend` is in `receiverBackends`. */
export const isReceiverBackend = (backend: Backend): boolean => receiverBackends.includes(backend)
