/**
 * A PostgreSQL write transaction sends its statements in batches, one round trip each
 * (`PgTransactions`): the writes nobody reads and the reads started early wait for the next
 * statement whose answer is needed (`PgHeldWrites`), BEGIN and the store's lock lead the first
 * batch, and what waits at the end goes with COMMIT. What must stay true: a statement sees every
 * earlier statement of its transaction, in their order; a held statement that fails fails its
 * transaction typed and nothing of it is stored; a batch that fails leaves the connection's
 * prepared statements as the server has them; the statements really do travel together (fewer
 * round trips); and a store's transaction plans its prepared statements once (generic plans).
 */
import { it } from "@effect/vitest"
import { SqlClient } from "@effect/sql/SqlClient"
import { SqlError } from "@effect/sql/SqlError"
import { Effect, Exit } from "effect"
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

/** A store of the two tables on a fresh schema, and the round trips its transactions make (each the texts it carried). */
const open = (url: string, maxConnections = 2) =>
  Effect.gen(function*() {
    const schema = yield* freshSchema(url)
    const store = yield* PgStore.open({ url: schema.url, maxConnections }, migrations, "test_migrations", "test_store")
    const trips: Array<ReadonlyArray<string>> = []
    const logged = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
      Effect.provideService(effect, StatementLog, {
        record: undefined,
        roundTrip: (texts: ReadonlyArray<string>) => trips.push(texts.map((text) => text.replace(/\s+/g, " ")))
      })
    const rows = (table: string) => Effect.map(schema.admin.unsafe(`SELECT * FROM "${schema.name}".${table} ORDER BY id`), (r) => [...r])
    return { store, trips, logged, rows, schema }
  })

/** What leads a write transaction's first round trip. */
const begin = ["BEGIN", expect.stringMatching(/^SELECT pg_advisory_xact_lock\(.*\) FROM \(SELECT set_config\('lock_timeout', '30000', true\).*set_config\('plan_cache_mode', 'force_generic_plan', true\)/)]

describePg("PostgreSQL: statements in batches, BEGIN with the first, COMMIT with the last", (url) => {
  it.scopedLive("a read sees the writes held before it, in their order, and all of them go in one round trip", () =>
    Effect.gen(function*() {
      const { logged, rows, store, trips } = yield* open(url)
      const { sql } = store
      const [read, queries] = yield* countQueries(logged(store.write(Effect.gen(function*() {
        yield* execWrite(store, sql`INSERT INTO a (id, note) VALUES (${1}, ${"first"})`)
        yield* execWrite(store, sql`UPDATE a SET note = ${"second"} WHERE id = ${1}`)
        yield* execWrite(store, sql`INSERT INTO b (id, n) VALUES (${1}, ${10})`)
        return yield* store.exec(sql<{ id: number; note: string }>`SELECT id, note FROM a`)
      }))))
      expect(read).toEqual([{ id: 1, note: "second" }])
      expect(yield* rows("b")).toEqual([{ id: 1, n: 10 }])
      expect(trips).toEqual([
        [
          ...begin,
          "INSERT INTO a (id, note) VALUES ($1, $2)",
          "UPDATE a SET note = $1 WHERE id = $2",
          "INSERT INTO b (id, n) VALUES ($1, $2)",
          "SELECT id, note FROM a"
        ],
        ["COMMIT"]
      ])
      // What `pg` was handed: one query per round trip.
      expect(queries).toBe(2)
    }))

  it.scopedLive("a statement after held writes answers its own rows", () =>
    Effect.gen(function*() {
      const { rows, store } = yield* open(url)
      const { sql } = store
      yield* store.write(execWrite(store, sql`INSERT INTO b (id, n) VALUES (${1}, ${1})`))
      const returned = yield* store.write(Effect.gen(function*() {
        yield* execWrite(store, sql`INSERT INTO a (id, note) VALUES (${7}, ${"x"})`)
        yield* execWrite(store, sql`UPDATE b SET n = n + 10`)
        return yield* store.exec(sql<{ n: number }>`UPDATE b SET n = n + 1 RETURNING n`)
      }))
      expect(returned).toEqual([{ n: 12 }])
      expect(yield* rows("a")).toEqual([{ id: 7, note: "x" }])
    }))

  it.scopedLive("a read started early goes with the next statement and answers what it saw there; awaited alone, it goes by itself", () =>
    Effect.gen(function*() {
      const { logged, store, trips } = yield* open(url)
      const { sql } = store
      yield* store.write(execWrite(store, sql`INSERT INTO b (id, n) VALUES (${1}, ${1})`))
      trips.length = 0
      const [early, after] = yield* logged(store.write(Effect.gen(function*() {
        const early = yield* store.execLater!(sql<{ n: number }>`SELECT n FROM b WHERE id = ${1}`, (rows) => rows)
        yield* execWrite(store, sql`UPDATE b SET n = ${5} WHERE id = ${1}`)
        const after = yield* store.exec(sql<{ n: number }>`SELECT n FROM b WHERE id = ${1}`)
        return [yield* early, after] as const
      })))
      // The early read ran first in the batch: it saw the row before the update.
      expect(early).toEqual([{ n: 1 }])
      expect(after).toEqual([{ n: 5 }])
      expect(trips).toEqual([[...begin, "SELECT n FROM b WHERE id = $1", "UPDATE b SET n = $1 WHERE id = $2", "SELECT n FROM b WHERE id = $1"], ["COMMIT"]])
      trips.length = 0
      const alone = yield* logged(store.write(Effect.gen(function*() {
        yield* execWrite(store, sql`UPDATE b SET n = ${6} WHERE id = ${1}`)
        const early = yield* store.execLater!(sql<{ n: number }>`SELECT n FROM b WHERE id = ${1}`, (rows) => rows)
        return yield* early
      })))
      expect(alone).toEqual([{ n: 6 }])
      expect(trips).toEqual([[...begin, "UPDATE b SET n = $1 WHERE id = $2", "SELECT n FROM b WHERE id = $1"], ["COMMIT"]])
    }))

  it.scopedLive("a held write that fails fails its transaction with a typed SqlError, and nothing it held is stored", () =>
    Effect.gen(function*() {
      const { rows, store } = yield* open(url)
      const { sql } = store
      yield* store.write(execWrite(store, sql`INSERT INTO a (id, note) VALUES (${1}, ${"kept"})`))
      const exit = yield* Effect.exit(store.write(Effect.gen(function*() {
        yield* execWrite(store, sql`INSERT INTO b (id, n) VALUES (${1}, ${1})`)
        yield* execWrite(store, sql`INSERT INTO a (id, note) VALUES (${1}, ${"duplicate"})`)
        return yield* store.exec(sql`SELECT id FROM a`)
      })))
      expect(JSON.stringify(exit)).toContain("23505")
      expect(exit._tag === "Failure" && exit.cause._tag === "Fail" && exit.cause.error instanceof SqlError).toBe(true)
      expect(yield* rows("a")).toEqual([{ id: 1, note: "kept" }])
      expect(yield* rows("b")).toEqual([])
      // The connection is fine afterwards: the next transaction commits.
      yield* store.write(execWrite(store, sql`INSERT INTO b (id, n) VALUES (${2}, ${2})`))
      expect(yield* rows("b")).toEqual([{ id: 2, n: 2 }])
    }))

  it.scopedLive("a batch that fails leaves the connection's prepared statements as the server has them", () =>
    Effect.gen(function*() {
      const { rows, store } = yield* open(url, 1)
      const { sql } = store
      yield* store.write(execWrite(store, sql`INSERT INTO a (id, note) VALUES (${1}, ${"kept"})`))
      // Statements this connection has not prepared yet: the first is parsed and fails when it
      // runs; the server never reaches the second.
      const failing = store.write(Effect.gen(function*() {
        yield* execWrite(store, sql`INSERT INTO a (id, note) VALUES (${1}, ${"once"}) RETURNING id`)
        return yield* store.exec(sql<{ n: number }>`SELECT count(*)::int AS n FROM a WHERE note <> ${"none"}`)
      }))
      expect(JSON.stringify(yield* Effect.exit(failing))).toContain("23505")
      // Both run again on the one connection: the first is not parsed twice ("already exists"),
      // the second is not bound before it is parsed ("does not exist").
      yield* store.write(execWrite(store, sql`INSERT INTO a (id, note) VALUES (${2}, ${"twice"}) RETURNING id`))
      const [count] = yield* store.write(store.exec(sql<{ n: number }>`SELECT count(*)::int AS n FROM a WHERE note <> ${"none"}`))
      expect(count).toEqual({ n: 2 })
      expect(yield* rows("a")).toEqual([{ id: 1, note: "kept" }, { id: 2, note: "twice" }])
    }))

  it.scopedLive("a failure after statements were held rolls them back; the next transaction does not send them", () =>
    Effect.gen(function*() {
      const { logged, rows, store, trips } = yield* open(url)
      const { sql } = store
      const exit = yield* Effect.exit(store.write(Effect.gen(function*() {
        yield* execWrite(store, sql`INSERT INTO a (id, note) VALUES (${1}, ${"dropped"})`)
        return yield* Effect.fail("decided against it" as const)
      })))
      expect(exit._tag).toBe("Failure")
      yield* logged(store.write(execWrite(store, sql`INSERT INTO b (id, n) VALUES (${1}, ${1})`)))
      // A transaction of held writes only: BEGIN, the write and COMMIT in one round trip.
      expect(trips).toEqual([[...begin, "INSERT INTO b (id, n) VALUES ($1, $2)", "COMMIT"]])
      expect(yield* rows("a")).toEqual([])
      expect(yield* rows("b")).toEqual([{ id: 1, n: 1 }])
    }))

  it.scopedLive("inside another client's transaction, the store's transactions are their own: its rollback leaves theirs, and they do not see its rows", () =>
    Effect.gen(function*() {
      const { rows, schema, store } = yield* open(url)
      const { sql } = store
      // The application's own client (another pool), in a transaction that writes, then fails.
      const app = schema.admin
      const exit = yield* Effect.exit(app.withTransaction(Effect.gen(function*() {
        yield* app.unsafe(`INSERT INTO "${schema.name}".a (id, note) VALUES (1, 'the application''s')`)
        yield* store.write(execWrite(store, sql`INSERT INTO b (id, n) VALUES (${1}, ${1})`))
        const seen = yield* store.rowLockedWrite(store.exec(sql<{ id: number }>`SELECT id FROM a`))
        const read = yield* store.read(store.exec(sql<{ id: number }>`SELECT id FROM a`))
        return yield* Effect.fail({ seen, read })
      })))
      expect(exit).toEqual(Exit.fail({ seen: [], read: [] }))
      expect(yield* rows("a")).toEqual([])
      expect(yield* rows("b")).toEqual([{ id: 1, n: 1 }])
    }))

  it.scopedLive("BEGIN and the store's lock go with the first statement: a second writer reads what the first committed", () =>
    Effect.gen(function*() {
      const { store } = yield* open(url)
      const { sql } = store
      yield* store.write(execWrite(store, sql`INSERT INTO b (id, n) VALUES (${1}, ${0})`))
      // Each increment reads n in its first round trip (with BEGIN and the lock), then writes
      // n + 1: under the lock, no increment is lost.
      const increment = store.write(Effect.gen(function*() {
        const [row] = yield* store.exec(sql<{ n: number }>`SELECT n FROM b WHERE id = ${1}`)
        yield* Effect.sleep("1 millis")
        yield* execWrite(store, sql`UPDATE b SET n = ${row!.n + 1} WHERE id = ${1}`)
      }))
      yield* Effect.all(Array.from({ length: 20 }, () => increment), { concurrency: 4 })
      const [row] = yield* store.read(store.exec(sql<{ n: number }>`SELECT n FROM b WHERE id = 1`))
      expect(row!.n).toBe(20)
    }))

  it.scopedLive("fibers that share one transaction's connection each get their own statement's answer", () =>
    Effect.gen(function*() {
      const { store } = yield* open(url)
      const { sql } = store
      // Each fiber yields to the others just before its round trip and as it waits: the round
      // trips of the one connection are sent in whatever order the fibers reach them.
      const ask = (i: number) =>
        Effect.zipRight(
          Effect.yieldNow(),
          store.exec(sql<{ n: number; tag: string }>`SELECT ${i}::int AS n, ${`fiber-${i}`}::text AS tag`)
        )
      const answers = yield* store.write(Effect.all(Array.from({ length: 12 }, (_, i) => ask(i)), { concurrency: "unbounded" }))
      expect(answers).toEqual(Array.from({ length: 12 }, (_, i) => [{ n: i, tag: `fiber-${i}` }]))
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

  it.scopedLive("the store's settings hold in its write transactions, exact and parallel, and end with them", () =>
    Effect.gen(function*() {
      const { store } = yield* open(url, 1)
      const { sql } = store
      const settings = sql<{ lock: string; plans: string }>`
        SELECT current_setting('lock_timeout') AS lock, current_setting('plan_cache_mode') AS plans`
      const expected = [{ lock: "30s", plans: "force_generic_plan" }]
      expect(yield* store.write(store.exec(settings))).toEqual(expected)
      expect(yield* store.rowLockedWrite(store.exec(settings))).toEqual(expected)
      // The store's one connection, in a read transaction (which sets nothing): the session's own values.
      const schema = yield* freshSchema(url)
      const [session] = yield* schema.admin.unsafe(`SELECT current_setting('lock_timeout') AS lock, current_setting('plan_cache_mode') AS plans`)
      expect(yield* store.read(store.exec(settings))).toEqual([session])
    }))

  it.scopedLive("what is still held at the end goes with COMMIT: one round trip for both", () =>
    Effect.gen(function*() {
      const { logged, rows, store, trips } = yield* open(url)
      const { sql } = store
      yield* store.write(execWrite(store, sql`INSERT INTO b (id, n) VALUES (${1}, ${0})`))
      trips.length = 0
      const [, queries] = yield* countQueries(logged(store.write(Effect.gen(function*() {
        const [row] = yield* store.exec(sql<{ n: number }>`SELECT n FROM b WHERE id = 1`)
        yield* execWrite(store, sql`INSERT INTO a (id, note) VALUES (${1}, ${`after ${row!.n}`})`)
      }))))
      expect(trips).toEqual([[...begin, "SELECT n FROM b WHERE id = 1"], ["INSERT INTO a (id, note) VALUES ($1, $2)", "COMMIT"]])
      expect(queries).toBe(2)
      expect(yield* rows("a")).toEqual([{ id: 1, note: "after 0" }])
    }))

  it.scopedLive("a held write that fails at COMMIT fails its transaction typed, stores nothing, and leaves the connection usable", () =>
    Effect.gen(function*() {
      const { rows, store } = yield* open(url, 1)
      const { sql } = store
      yield* store.write(execWrite(store, sql`INSERT INTO a (id, note) VALUES (${1}, ${"kept"})`))
      const exit = yield* Effect.exit(store.write(Effect.gen(function*() {
        yield* store.exec(sql`SELECT id FROM a`)
        yield* execWrite(store, sql`INSERT INTO b (id, n) VALUES (${1}, ${1})`)
        yield* execWrite(store, sql`INSERT INTO a (id, note) VALUES (${1}, ${"duplicate"})`)
      })))
      expect(JSON.stringify(exit)).toContain("23505")
      expect(exit._tag === "Failure" && exit.cause._tag === "Fail" && exit.cause.error instanceof SqlError).toBe(true)
      expect(yield* rows("a")).toEqual([{ id: 1, note: "kept" }])
      expect(yield* rows("b")).toEqual([])
      // The store's one connection was rolled back: the next transaction on it commits.
      yield* store.write(Effect.gen(function*() {
        yield* store.exec(sql`SELECT id FROM b`)
        yield* execWrite(store, sql`INSERT INTO b (id, n) VALUES (${2}, ${2})`)
      }))
      expect(yield* rows("b")).toEqual([{ id: 2, n: 2 }])
    }))
})

/** Runs `effect` and counts the queries `pg` is handed meanwhile (one per round trip). */
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
    (counter) => Effect.map(effect, (result) => [result, counter.queries] as const),
    (counter) => Effect.sync(() => void (pg.Client.prototype.query = counter.original))
  )
