/**
 * The store's batches send each value as its parameter's text (`toParameter`): the same text
 * `pg` sends for that value in its own queries, so a statement reads the same rows either way.
 * Each value goes to the server once as `pg` maps it and once as `toParameter` maps it; the
 * server answers the parameter's text (or bytes) as it received it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import pg from "pg"
import { toParameter } from "../../src/layers/internal/PgTransactions.js"
import { describePg } from "./support.js"

const texts: ReadonlyArray<readonly [string, unknown]> = [
  ["a string", "plain"],
  ["quotes, backslashes, braces, commas", `a "quoted" \\ back{s}lash, comma`],
  ["non-ASCII text", "événement ✓ 事件"],
  ["an empty string", ""],
  ["an integer", 42],
  ["a negative fraction", -1.5],
  ["a large number", 2 ** 53 + 2],
  ["minus zero", -0],
  ["a bigint", 9_007_199_254_740_993n],
  ["true", true],
  ["false", false],
  ["null", null],
  ["undefined", undefined],
  ["a date", new Date(Date.UTC(2026, 11, 6, 4, 5, 6, 789))],
  ["a date before year 1", new Date(Date.UTC(-5, 0, 2, 3, 4, 5, 6))],
  ["an array of numbers", [1, 2.5, -3]],
  ["an array of strings with quotes and nulls", ["a", `b"c`, "d\\e", null, "", "NULL"]],
  ["a nested array", [[1, 2], [3, null]]],
  ["an array of dates, objects and bytes", [new Date(Date.UTC(2020, 0, 1)), { a: 1 }, Buffer.from([1, 255])]],
  ["an empty array", []],
  ["an object (JSON)", { id: "e-1", n: 1, nested: { list: [1, "two", null] } }]
]

const bytes: ReadonlyArray<readonly [string, unknown]> = [
  ["a Buffer", Buffer.from([0, 1, 2, 254, 255])],
  ["a Uint8Array over part of a buffer", new Uint8Array(new Uint8Array([9, 8, 7, 6, 5]).buffer, 1, 3)],
  ["an empty Buffer", Buffer.alloc(0)]
]

describePg("PostgreSQL: a statement's values sent as pg sends them", (url) => {
  const client = new pg.Client({ connectionString: url })
  beforeAll(() => client.connect())
  afterAll(() => client.end())

  const both = async (text: string, value: unknown) => {
    const byPg = await client.query(text, [value])
    const ours = await client.query(text, [toParameter(value)])
    return [byPg.rows, ours.rows] as const
  }

  describe("as text", () => {
    for (const [name, value] of texts) {
      it(name, async () => {
        const [byPg, ours] = await both("SELECT $1::text AS v", value)
        expect(ours).toEqual(byPg)
      })
    }
  })

  describe("as bytes", () => {
    for (const [name, value] of bytes) {
      it(name, async () => {
        const [byPg, ours] = await both("SELECT $1::bytea AS v", value)
        expect(ours).toEqual(byPg)
        expect(Buffer.isBuffer(ours[0]!.v)).toBe(true)
      })
    }
  })

  it("typed columns read the same values (timestamptz, int8, jsonb, int[] and text[])", async () => {
    const values = [new Date(Date.UTC(2026, 0, 2, 3, 4, 5, 6)), 12_345_678_901n, { a: [1, { b: "c" }] }, [3, 1, 2], ["x", "y\"z"]]
    const text = "SELECT $1::timestamptz AS at, $2::int8 AS n, $3::jsonb AS j, $4::int[] AS ints, $5::text[] AS strings"
    const byPg = await client.query(text, values)
    const ours = await client.query(text, values.map(toParameter))
    expect(ours.rows).toEqual(byPg.rows)
    expect(ours.rows[0].at).toEqual(values[0])
  })
})
