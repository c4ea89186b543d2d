/**
 * The backends the contract suite runs against: SQLite always; PostgreSQL when
 * FAIR_RELAY_PG_URL names a database (`.ci/run` sets it). Each world gets fresh stores: temp
 * files for SQLite, fresh schemas for PostgreSQL.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as PgClient from "@effect/sql-pg/PgClient"
import Database from "better-sqlite3"
import { Effect, Redacted } from "effect"
import type { Scope } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as PgInbox from "../../src/layers/PgInbox.js"
import * as PgRelayQueue from "../../src/layers/PgRelayQueue.js"
import { makeWorld, sqliteStores } from "../../scenarios/World.js"
import type { World, WorldOptions } from "../../scenarios/World.js"

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
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "fair-relay-test-"))),
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

const postgres = (url: string): Backend => ({
  name: "postgres",
  world: (options) =>
    Effect.gen(function*() {
      const queue = yield* freshSchema(url)
      const inbox = yield* freshSchema(url)
      const world = yield* makeWorld({
        ...options,
        stores: {
          queue: (policy) => PgRelayQueue.make({ url: queue.url, policy, maxConnections: 2 }),
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
export const backends: ReadonlyArray<Backend> = pgUrl === undefined ? [sqlite] : [sqlite, postgres(pgUrl)]

/** The backends that are not configured here, by name, so suites can report them as skipped. */
export const skippedBackends: ReadonlyArray<string> = pgUrl === undefined ? ["postgres (set FAIR_RELAY_PG_URL)"] : []
