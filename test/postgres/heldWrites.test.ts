/**
 * A PostgreSQL write transaction holds the writes nobody reads and sends them with its next
 * statement (`PgHeldWrites`), and sends BEGIN with its first statement (`PgTransactions`). What
 * must stay true: a statement sees every earlier write of its transaction, held writes of one
 * table keep their order, a held write that fails fails its transaction typed and nothing of it
 * is stored, and the statements really do travel together (fewer round trips) — the last ones with
 * COMMIT; and a store's transaction plans its prepared statements once (generic plans).
 */
import { it } from "@effect/vitest"
import { SqlClient } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import pg from "pg"
import { expect } from "vitest"
import * as PgStore from "../../src/layers/internal/PgStore.js"
import { execWrite, StatementLog } from "../../src/layers/internal/Store.js"
import { freshSchema } from "../support/backends.js"
import { describePg } from "./support.js"

const migrations = {
  "1_tables": Effect.gen(function*() {
    const sql = yield* SqlClient
    yield* sql`CREATE TABLE a (id INTEGER PRIMARY KEY, note TEXT)`
    yield* sql`CREATE TABLE b (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)`
  })
}

/** A store of the two tables on a fresh schema, and the statements its transactions send. */
const open = (url: string, maxConnections = 2) =>
  Effect.gen(function*() {
    const schema = yield* freshSchema(url)
    const store = yield* PgStore.open({ url: schema.url, maxConnections }, migrations, "test_migrations", "test_store")
    const sent: Array<string> = []
    const logged = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.provideService(effect, StatementLog, { record: (text: string) => sent.push(text.replace(/\s+/g, " ")) })
    const rows = (table: string) => Effect.map(schema.admin.unsafe(`SELECT * FROM "${schema.name}".${table} ORDER BY id`), (r) => [...r])
    return { store, sent, logged, rows }
  })

describePg("PostgreSQL: held writes and BEGIN with the first statement", (url) => {
  it.scopedLive("a read sees the writes held before it; writes of one table keep their order", () =>
    Effect.gen(function*() {
      const { logged, rows, sent, store } = yield* open(url)
      const { sql } = store
      const read = yield* logged(store.write(Effect.gen(function*() {
        yield* execWrite(store, "a", sql`INSERT INTO a (id, note) VALUES (${1}, ${"first"})`)
        yield* execWrite(store, "a", sql`UPDATE a SET note = ${"second"} WHERE id = ${1}`)
        yield* execWrite(store, "b", sql`INSERT INTO b (id, n) VALUES (${1}, ${10})`)
        return yield* store.exec(sql<{ id: number; note: string }>`SELECT id, note FROM a`)
      })))
      expect(read).toEqual([{ id: 1, note: "second" }])
      expect(yield* rows("b")).toEqual([{ id: 1, n: 10 }])
      // The insert went alone (the update changes its table), the update and b's insert together.
      expect(sent).toEqual([
        "INSERT INTO a (id, note) VALUES ($1, $2)",
        "WITH held_0 AS (UPDATE a SET note = $1 WHERE id = $2) INSERT INTO b (id, n) VALUES ($3, $4)",
        "SELECT id, note FROM a"
      ])
    }))

  it.scopedLive("a statement of another table carries the held writes in front of it and answers its own rows", () =>
    Effect.gen(function*() {
      const { logged, rows, sent, store } = yield* open(url)
      const { sql } = store
      yield* store.write(execWrite(store, "b", sql`INSERT INTO b (id, n) VALUES (${1}, ${1})`))
      sent.length = 0
      const returned = yield* logged(store.write(Effect.gen(function*() {
        yield* execWrite(store, "a", sql`INSERT INTO a (id, note) VALUES (${7}, ${"x"})`)
        return yield* store.exec(sql<{ n: number }>`UPDATE b SET n = n + 1 RETURNING n`, "b")
      })))
      expect(returned).toEqual([{ n: 2 }])
      expect(sent).toEqual(["WITH held_0 AS (INSERT INTO a (id, note) VALUES ($1, $2)) UPDATE b SET n = n + 1 RETURNING n"])
      expect(yield* rows("a")).toEqual([{ id: 7, note: "x" }])
    }))

  it.scopedLive("a held write that fails fails its transaction with a typed SqlError, and nothing it held is stored", () =>
    Effect.gen(function*() {
      const { rows, store } = yield* open(url)
      const { sql } = store
      yield* store.write(execWrite(store, "a", sql`INSERT INTO a (id, note) VALUES (${1}, ${"kept"})`))
      const exit = yield* Effect.exit(store.write(Effect.gen(function*() {
        yield* execWrite(store, "b", sql`INSERT INTO b (id, n) VALUES (${1}, ${1})`)
        yield* execWrite(store, "a", sql`INSERT INTO a (id, note) VALUES (${1}, ${"duplicate"})`)
      })))
      expect(exit._tag).toBe("Failure")
      const error = exit._tag === "Failure" ? exit.cause : undefined
      expect(JSON.stringify(error)).toContain("23505")
      expect(exit._tag === "Failure" && exit.cause._tag === "Fail" && exit.cause.error instanceof SqlError).toBe(true)
      expect(yield* rows("a")).toEqual([{ id: 1, note: "kept" }])
      expect(yield* rows("b")).toEqual([])
      // The connection is fine afterwards: the next transaction commits.
      yield* store.write(execWrite(store, "b", sql`INSERT INTO b (id, n) VALUES (${2}, ${2})`))
      expect(yield* rows("b")).toEqual([{ id: 2, n: 2 }])
    }))

  it.scopedLive("a failure after writes were held rolls them back; the next transaction does not send them", () =>
    Effect.gen(function*() {
      const { logged, rows, sent, store } = yield* open(url)
      const { sql } = store
      const exit = yield* Effect.exit(store.write(Effect.gen(function*() {
        yield* execWrite(store, "a", sql`INSERT INTO a (id, note) VALUES (${1}, ${"dropped"})`)
        return yield* Effect.fail("decided against it" as const)
      })))
      expect(exit._tag).toBe("Failure")
      sent.length = 0
      yield* logged(store.write(execWrite(store, "b", sql`INSERT INTO b (id, n) VALUES (${1}, ${1})`)))
      expect(sent).toEqual(["INSERT INTO b (id, n) VALUES ($1, $2)"])
      expect(yield* rows("a")).toEqual([])
      expect(yield* rows("b")).toEqual([{ id: 1, n: 1 }])
    }))

  it.scopedLive("a first statement without parameters goes with BEGIN and the store's lock: a second writer reads what the first committed", () =>
    Effect.gen(function*() {
      const { store } = yield* open(url)
      const { sql } = store
      yield* store.write(execWrite(store, "b", sql`INSERT INTO b (id, n) VALUES (${1}, ${0})`))
      // Each increment reads n with a parameterless first statement (sent with BEGIN and the lock),
      // then writes n + 1: under the lock, no increment is lost.
      const increment = store.write(Effect.gen(function*() {
        const [row] = yield* store.exec(sql<{ n: number }>`SELECT n FROM b WHERE id = 1`)
        yield* Effect.sleep("1 millis")
        yield* execWrite(store, "b", sql`UPDATE b SET n = ${row!.n + 1} WHERE id = ${1}`)
      }))
      yield* Effect.all(Array.from({ length: 20 }, () => increment), { concurrency: 4 })
      const [row] = yield* store.read(store.exec(sql<{ n: number }>`SELECT n FROM b WHERE id = 1`))
      expect(row!.n).toBe(20)
    }))

  it.scopedLive("the store's transactions plan a prepared statement once: generic plans, no custom ones", () =>
    Effect.gen(function*() {
      const { store } = yield* open(url, 1)
      const { sql } = store
      for (let id = 1; id <= 10; id++) {
        yield* store.write(store.exec(sql`SELECT n FROM b WHERE id = ${id}`))
      }
      // The store's one connection is this session: its prepared statements, and how each was planned.
      const [plans] = yield* store.read(store.exec(sql<{ custom: string; generic: string }>`
        SELECT custom_plans AS custom, generic_plans AS generic FROM pg_prepared_statements
        WHERE statement = ${"SELECT n FROM b WHERE id = $1"}`))
      // The server's default would plan the first five calls for their values (custom plans).
      expect({ custom: Number(plans!.custom), generic: Number(plans!.generic) }).toEqual({ custom: 0, generic: 10 })
    }))

  it.scopedLive("what is still held at the end goes with COMMIT: one round trip for both", () =>
    Effect.gen(function*() {
      const { logged, rows, sent, store } = yield* open(url)
      const { sql } = store
      yield* store.write(execWrite(store, "b", sql`INSERT INTO b (id, n) VALUES (${1}, ${0})`))
      sent.length = 0
      const queries = yield* countQueries(logged(store.write(Effect.gen(function*() {
        const [row] = yield* store.exec(sql<{ n: number }>`SELECT n FROM b WHERE id = 1`)
        yield* execWrite(store, "a", sql`INSERT INTO a (id, note) VALUES (${1}, ${`after ${row!.n}`})`)
      }))))
      // BEGIN, the lock and the read; then the insert and COMMIT.
      expect(queries).toBe(2)
      expect(sent).toEqual(["SELECT n FROM b WHERE id = 1", "INSERT INTO a (id, note) VALUES ($1, $2)"])
      expect(yield* rows("a")).toEqual([{ id: 1, note: "after 0" }])
    }))

  it.scopedLive("a held write that fails at COMMIT fails its transaction typed, stores nothing, and leaves the connection usable", () =>
    Effect.gen(function*() {
      const { rows, store } = yield* open(url, 1)
      const { sql } = store
      yield* store.write(execWrite(store, "a", sql`INSERT INTO a (id, note) VALUES (${1}, ${"kept"})`))
      const exit = yield* Effect.exit(store.write(Effect.gen(function*() {
        yield* store.exec(sql`SELECT id FROM a`)
        yield* execWrite(store, "b", sql`INSERT INTO b (id, n) VALUES (${1}, ${1})`)
        yield* execWrite(store, "a", sql`INSERT INTO a (id, note) VALUES (${1}, ${"duplicate"})`)
      })))
      expect(JSON.stringify(exit)).toContain("23505")
      expect(exit._tag === "Failure" && exit.cause._tag === "Fail" && exit.cause.error instanceof SqlError).toBe(true)
      expect(yield* rows("a")).toEqual([{ id: 1, note: "kept" }])
      expect(yield* rows("b")).toEqual([])
      // The store's one connection was rolled back: the next transaction on it commits.
      yield* store.write(Effect.gen(function*() {
        yield* store.exec(sql`SELECT id FROM b`)
        yield* execWrite(store, "b", sql`INSERT INTO b (id, n) VALUES (${2}, ${2})`)
      }))
      expect(yield* rows("b")).toEqual([{ id: 2, n: 2 }])
    }))
})

/** Runs `effect` and counts the queries `pg` sends meanwhile (one per round trip). */
const countQueries = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.acquireUseRelease(
    Effect.sync(() => {
      const counter = { queries: 0, original: pg.Client.prototype.query }
      pg.Client.prototype.query = function(this: pg.Client, ...args: Array<unknown>) {
        counter.queries++
        return (counter.original as (...args: Array<unknown>) => unknown).apply(this, args)
      } as unknown as typeof counter.original
      return counter
    }),
    (counter) => Effect.map(effect, () => counter.queries),
    (counter) => Effect.sync(() => void (pg.Client.prototype.query = counter.original))
  )
