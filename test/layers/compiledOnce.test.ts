/**
 * `CompiledOnce.make`: a PostgreSQL statement compiled whole (each shape's text compiled once) is what
 * `compile` answers, whatever the call site met before (other values, lists of other lengths,
 * other fragments). (The PostgreSQL stores' statements run through it in every test of
 * `test/postgres`.)
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import { describe, expect, it } from "@effect/vitest"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Statement from "@effect/sql/Statement"
import { Effect } from "effect"
import * as CompiledOnce from "../../src/layers/internal/CompiledOnce.js"

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

/**
 * A PostgreSQL statement constructor (its compiler numbers placeholders across the whole
 * statement), its identifiers transformed by `transform`; compiling needs no server.
 */
const constructor = (transform?: (name: string) => string) =>
  Statement.make(Effect.dieMessage("no connection"), PgClient.makeCompiler(transform), [], undefined) as unknown as SqlClient.SqlClient

describe("CompiledOnce.make", () => {
  const sql = constructor()
  const compileWhole = CompiledOnce.make()
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

  it("keeps each client's texts apart: a call site of two clients whose identifiers differ is compiled by each", () => {
    const plain = constructor()
    const upper = constructor((name) => name.toUpperCase())
    const table = (sql: SqlClient.SqlClient, n: number) => sql`SELECT * FROM ${sql("events")} WHERE n > ${n}`
    const ofPlain = CompiledOnce.make()
    const ofUpper = CompiledOnce.make()
    for (const n of [1, 2]) {
      expect(ofPlain(table(plain, n))).toEqual(['SELECT * FROM "events" WHERE n > $1', [n]])
      expect(ofUpper(table(upper, n))).toEqual(['SELECT * FROM "EVENTS" WHERE n > $1', [n]])
    }
  })
})
