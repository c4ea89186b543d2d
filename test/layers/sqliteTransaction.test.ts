/**
 * The SQLite store's own transactions: a COMMIT that fails is
 * a typed `SqlError`, its transaction is rolled back, and the store keeps working; a failed or
 * interrupted body is rolled back; writes take turns on the one connection, and a writer interrupted
 * while it waits for it leaves the others their turns; the caller's context is back after every
 * way out of a transaction.
 */
import * as Reactivity from "@effect/experimental/Reactivity"
import * as SqlClient from "@effect/sql/SqlClient"
import * as SqliteClient from "@effect/sql-sqlite-node/SqliteClient"
import { SqlError } from "@effect/sql/SqlError"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Fiber, Option } from "effect"
import * as path from "node:path"
import * as SqliteStore from "../../src/layers/internal/SqliteStore.js"
import type { Store } from "../../src/layers/internal/Store.js"
import { tempDir } from "../support/backends.js"

const migrations = {
  "1_tables": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    Effect.zipRight(
      sql`CREATE TABLE parent (id INTEGER PRIMARY KEY)`,
      sql`CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)`
    ))
}

const openStore = Effect.gen(function*() {
  const dir = yield* tempDir
  const store = yield* SqliteStore.open({ filename: path.join(dir, "store.db") }, migrations, "test_migrations")
  // A deferred foreign key is checked at COMMIT: the way to make a COMMIT fail on demand.
  yield* store.sql.unsafe("PRAGMA foreign_keys = ON")
  return store
})

// A store next to the application's tables, on the application's own client.
const openOnClient = Effect.gen(function*() {
  const dir = yield* tempDir
  const sql = yield* SqliteClient.make({ filename: path.join(dir, "app.db") }).pipe(Effect.provide(Reactivity.layer))
  return yield* SqliteStore.fromClient(sql, migrations, "test_migrations")
})

const count = (store: Store, table: string) =>
  store.read(Effect.map(store.sql<{ n: number }>`SELECT COUNT(*) AS n FROM ${store.sql(table)}`, (rows) => Number(rows[0]!.n)))

describe("SQLite store transactions", () => {
  it.scoped("a COMMIT that fails is a typed SqlError, rolls back, and the next write works", () =>
    Effect.gen(function*() {
      const store = yield* openStore
      const exit = yield* Effect.exit(store.write(store.sql`INSERT INTO child (id, parent) VALUES (1, 42)`))
      expect(Exit.isFailure(exit)).toBe(true)
      if (Exit.isFailure(exit)) {
        const error = exit.cause._tag === "Fail" ? exit.cause.error : undefined
        expect(error).toBeInstanceOf(SqlError)
        expect(String((error as SqlError).cause)).toMatch(/FOREIGN KEY/)
      }
      expect(yield* count(store, "child")).toBe(0)
      yield* store.write(Effect.zipRight(store.sql`INSERT INTO parent (id) VALUES (42)`, store.sql`INSERT INTO child (id, parent) VALUES (1, 42)`))
      expect(yield* count(store, "child")).toBe(1)
    }))

  it.scoped("a failed body is rolled back and its error kept", () =>
    Effect.gen(function*() {
      const store = yield* openStore
      const exit = yield* Effect.exit(store.write(Effect.zipRight(store.sql`INSERT INTO parent (id) VALUES (1)`, Effect.fail("no"))))
      expect(exit).toStrictEqual(Exit.fail("no"))
      expect(yield* count(store, "parent")).toBe(0)
    }))

  it.scoped("an interrupted body is rolled back and the connection is free again", () =>
    Effect.gen(function*() {
      const store = yield* openStore
      const fiber = yield* Effect.fork(store.write(Effect.zipRight(store.sql`INSERT INTO parent (id) VALUES (1)`, Effect.never)))
      yield* Effect.yieldNow()
      yield* Effect.yieldNow()
      yield* Fiber.interrupt(fiber)
      expect(yield* count(store, "parent")).toBe(0)
      yield* store.write(store.sql`INSERT INTO parent (id) VALUES (2)`)
      expect(yield* count(store, "parent")).toBe(1)
    }))

  it.scoped("concurrent writes take turns and all commit", () =>
    Effect.gen(function*() {
      const store = yield* openStore
      yield* Effect.forEach(
        Array.from({ length: 20 }, (_, i) => i),
        (i) => store.write(Effect.zipRight(Effect.yieldNow(), store.sql`INSERT INTO parent (id) VALUES (${i})`)),
        { concurrency: "unbounded", discard: true }
      )
      expect(yield* count(store, "parent")).toBe(20)
    }))

  it.scoped.each([["its own file", openStore], ["the application's client", openOnClient]] as const)(
    "a writer interrupted while it waits for the connection leaves the others their turns (a store on %s)",
    ([, open]) =>
    Effect.gen(function*() {
      const store = yield* open
      const holding = yield* Deferred.make<void>()
      const release = yield* Deferred.make<void>()
      const holder = yield* Effect.fork(store.write(Effect.zipRight(Deferred.succeed(holding, undefined), Deferred.await(release))))
      yield* Deferred.await(holding)
      const waiting = yield* Effect.forEach([1, 2, 3], (id) => Effect.fork(store.write(store.sql`INSERT INTO parent (id) VALUES (${id})`)))
      // A statement outside any transaction waits for the connection too.
      const reading = yield* Effect.fork(store.sql<{ n: number }>`SELECT COUNT(*) AS n FROM parent`)
      for (let i = 0; i < 10; i++) yield* Effect.yieldNow()
      yield* Fiber.interrupt(waiting[1]!)
      yield* Deferred.succeed(release, undefined)
      yield* Fiber.join(holder)
      yield* Fiber.join(waiting[0]!)
      yield* Fiber.join(waiting[2]!)
      yield* Fiber.join(reading)
      expect(yield* count(store, "parent")).toBe(2)
      expect(yield* store.read(store.sql<{ id: number }>`SELECT id FROM parent ORDER BY id`)).toEqual([{ id: 1 }, { id: 3 }])
    }))

  it.scoped("the body runs on the store's connection, and the caller's context is back after success, failure and defect", () =>
    Effect.gen(function*() {
      const store = yield* openStore
      const outside = Effect.map(Effect.serviceOption(SqlClient.TransactionConnection), Option.isSome)
      expect(yield* store.write(outside)).toBe(true)
      expect(yield* outside).toBe(false)
      yield* Effect.exit(store.write(Effect.fail("no")))
      expect(yield* outside).toBe(false)
      yield* Effect.exit(store.write(Effect.die("boom")))
      expect(yield* outside).toBe(false)
    }))

  it.scoped("more distinct statements than the connection keeps prepared: each runs as written, the first again after it was dropped", () =>
    Effect.gen(function*() {
      const store = yield* openStore
      // 300 texts (the connection keeps 200 prepared), several of each length: each answers its own constant.
      const constants = Array.from({ length: 300 }, (_, i) => i)
      const answers = yield* store.read(
        Effect.forEach(constants, (i) => Effect.map(store.exec(store.sql.unsafe<{ v: number }>(`SELECT ${i} AS v`)), (rows) => rows[0]!.v))
      )
      expect(answers).toStrictEqual(constants)
      expect(yield* store.read(store.exec(store.sql.unsafe<{ v: number }>("SELECT 0 AS v")))).toStrictEqual([{ v: 0 }])
      yield* store.write(store.exec(store.sql`INSERT INTO parent (id) VALUES (${7})`))
      expect(yield* count(store, "parent")).toBe(1)
    }))
})
