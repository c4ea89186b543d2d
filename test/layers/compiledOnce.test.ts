/**
 * `CompiledOnce`: a SQLite store's statements, built with each call site's text compiled once,
 * compile to what `@effect/sql` itself compiles from the same template and arguments — whatever
 * the call site met before (other values, lists of other lengths, other fragments) — and run; a
 * PostgreSQL statement compiled whole (`compileWhole`, each shape's text compiled once) is what
 * `compile` answers. (The PostgreSQL stores' statements run through it in every test of
 * `test/postgres`.)
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Statement from "@effect/sql/Statement"
import { Effect } from "effect"
import { compiledOnce, compileWhole } from "../../src/layers/internal/CompiledOnce.js"
import * as SqliteConnection from "../../src/layers/internal/SqliteConnection.js"
import { rowsTable } from "../../src/layers/internal/Store.js"

/** One call site: the same template each call, the arguments as given. */
const site = (sql: SqlClient.SqlClient, ids: ReadonlyArray<string>, floor: unknown, order: string) =>
  sql`SELECT id, n FROM t WHERE id IN ${sql.in(ids)} AND n >= ${floor} ${sql.literal(order)}`

/** A call site whose statement goes into another as a fragment. */
const inner = (sql: SqlClient.SqlClient, n: number) => sql`n > ${n}`
const outer = (sql: SqlClient.SqlClient, n: number, ids: ReadonlyArray<string>) =>
  sql`SELECT id FROM t WHERE ${inner(sql, n)} AND id IN ${sql.in(ids)}`

const calls: ReadonlyArray<readonly [ReadonlyArray<string>, unknown, string]> = [
  [["a"], 1, "ORDER BY id"],
  [["b"], 2, "ORDER BY id"],
  [["a", "b", "c"], "3", "ORDER BY id"],
  [["c"], null, "ORDER BY n"],
  [["a", "b"], 4n, "ORDER BY id"],
  [["b"], 5, "ORDER BY id"]
]

describe("CompiledOnce", () => {
  it.scoped("compiles every call of a call site to what @effect/sql compiles, and the statements run", () =>
    Effect.gen(function*() {
      const { sql } = yield* SqliteConnection.make(":memory:")
      const once = compiledOnce(sql)
      yield* sql`CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER)`
      yield* sql`INSERT INTO t (id, n) VALUES ('a', 1), ('b', 2), ('c', 3)`
      for (const [ids, floor, order] of calls) {
        expect(site(once, ids, floor, order).compile()).toEqual(site(sql, ids, floor, order).compile())
        expect(yield* site(once, ids, floor, order)).toEqual(yield* site(sql, ids, floor, order))
      }
      for (const [n, ids] of [[0, ["a"]], [1, ["a", "b", "c"]], [2, ["c"]], [0, ["b"]]] as const) {
        expect(outer(once, n, ids).compile()).toEqual(outer(sql, n, ids).compile())
        expect(yield* outer(once, n, ids)).toEqual(yield* outer(sql, n, ids))
      }
    }))

  it.scoped("compiles a call site's text once per shape: later calls of a known shape are that text and their values", () =>
    Effect.gen(function*() {
      const { sql } = yield* SqliteConnection.make(":memory:")
      const once = compiledOnce(sql)
      const first = site(once, ["a"], 1, "ORDER BY id")
      const again = site(once, ["b"], 2, "ORDER BY id")
      // The first is @effect/sql's own statement (a segment per part); the second one literal with its values.
      expect(first.segments.length).toBeGreaterThan(1)
      expect(again.segments.map((segment) => segment._tag)).toEqual(["Literal"])
      expect(again.compile()).toEqual([first.compile()[0], ["b", 2]])
      // A list of another length is another shape: compiled afresh, then known.
      expect(site(once, ["a", "b"], 2, "ORDER BY id").segments.length).toBeGreaterThan(1)
      expect(site(once, ["c", "d"], 3, "ORDER BY id").segments.map((segment) => segment._tag)).toEqual(["Literal"])
    }))

  it.scoped("leaves to @effect/sql what it cannot compile once: other fragments, identifiers, objects", () =>
    Effect.gen(function*() {
      const { sql } = yield* SqliteConnection.make(":memory:")
      const once = compiledOnce(sql)
      const anded = (sql: SqlClient.SqlClient, a: number, b: number) => sql`SELECT 1 WHERE ${sql.and([sql`${a} = 1`, sql`${b} = 2`])}`
      const named = (sql: SqlClient.SqlClient, table: string) => sql`SELECT * FROM ${sql(table)}`
      const blob = (sql: SqlClient.SqlClient, bytes: Uint8Array) => sql`SELECT length(${bytes}) AS n`
      for (let i = 0; i < 3; i++) {
        expect(anded(once, i, i + 1).compile()).toEqual(anded(sql, i, i + 1).compile())
        expect(named(once, `t${i}`).compile()).toEqual(named(sql, `t${i}`).compile())
        expect(yield* blob(once, new Uint8Array(i + 1))).toEqual([{ n: i + 1 }])
      }
      // A VALUES table (one literal with its values) is a fragment it knows, by its text.
      const table = (sql: SqlClient.SqlClient, rows: ReadonlyArray<{ readonly id: string }>) =>
        sql`SELECT v.id FROM ${rowsTable(sql, "t", ["id"], rows)}`
      for (const rows of [[{ id: "a" }], [{ id: "b" }], [{ id: "c" }, { id: "d" }]]) {
        expect(table(once, rows).compile()).toEqual(table(sql, rows).compile())
        expect(yield* table(once, rows)).toEqual(rows)
      }
      // A long text (a large bulk statement) is compiled each time: not kept.
      const many = Array.from({ length: 3_000 }, (_, i) => ({ id: `r${i}` }))
      for (let i = 0; i < 2; i++) {
        const statement = table(once, many)
        expect(statement.compile()[0].length).toBeGreaterThan(8_192)
        expect(statement.segments.length).toBeGreaterThan(1)
        expect(statement.compile()).toEqual(table(sql, many).compile())
      }
    }))

  it("is the client itself on any other dialect (PostgreSQL numbers its placeholders across a whole statement)", () => {
    // Only the dialect is asked: a client that answers "pg" to it.
    const pg = { onDialectOrElse: (options: { readonly pg?: () => unknown; readonly orElse: () => unknown }) => (options.pg ?? options.orElse)() }
    const client = pg as unknown as SqlClient.SqlClient
    expect(compiledOnce(client)).toBe(client)
  })
})

describe("compileWhole", () => {
  // A PostgreSQL statement constructor (its compiler numbers placeholders across the whole
  // statement); compiling needs no server.
  const sql = Statement.make(Effect.dieMessage("no connection"), PgClient.makeCompiler(), [], undefined) as unknown as SqlClient.SqlClient
  const rows = (table: string, json: string, n: number) =>
    sql`INSERT INTO ${sql(table)} SELECT * FROM ${sql`(SELECT * FROM json_populate_recordset(NULL::${sql(table)}, ${json}::json) LIMIT ${n}) AS v`} WHERE v.n > ${n}`

  it("answers what compile answers, whatever the call site met before", () => {
    for (const [ids, floor, order] of calls) expect(compileWhole(site(sql, ids, floor, order))).toEqual(site(sql, ids, floor, order).compile())
    // An inner statement's values are numbered in the outer one.
    for (const [n, ids] of [[0, ["a"]], [1, ["a", "b", "c"]], [2, ["c"]], [0, ["b"]]] as const) {
      expect(compileWhole(outer(sql, n, ids))).toEqual(outer(sql, n, ids).compile())
      expect(compileWhole(outer(sql, n, ids))[0]).toMatch(/^SELECT id FROM t WHERE n > \$1 AND id IN \(\$2/)
    }
    // Identifiers are part of the shape: each table its own text.
    for (const [table, json, n] of [["t", "[1]", 1], ["t", "[2, 3]", 2], ["u", "[4]", 1], ["t", "[5]", 1]] as const) {
      expect(compileWhole(rows(table, json, n))).toEqual(rows(table, json, n).compile())
    }
    // A custom segment (JSON) is compiled every time.
    const json = Statement.custom<Statement.Custom<"PgJson", unknown>>("PgJson")
    const custom = (value: object) => sql`SELECT ${json(value, undefined, undefined)} AS v, ${1} AS n`
    expect(compileWhole(custom({ a: 1 }))).toEqual(custom({ a: 1 }).compile())
    expect(compileWhole(custom({ a: 2 }))).toEqual(["SELECT $1 AS v, $2 AS n", [{ a: 2 }, 1]])
  })

  it("answers a known shape with the text compiled the first time (the same string) and the call's values", () => {
    const first = compileWhole(site(sql, ["x"], 7, "ORDER BY n DESC"))
    const again = compileWhole(site(sql, ["y"], 8, "ORDER BY n DESC"))
    expect(again[0]).toBe(first[0])
    expect(again[1]).toEqual(["y", 8])
    // Another list length or fragment is another shape.
    expect(compileWhole(site(sql, ["y", "z"], 8, "ORDER BY n DESC"))[0]).not.toBe(first[0])
    expect(compileWhole(site(sql, ["y"], 8, "ORDER BY n"))[0]).toBe(site(sql, ["y"], 8, "ORDER BY n").compile()[0])
  })
})
