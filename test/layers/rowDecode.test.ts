/**
 * Hot row shapes decode by plain checks read off their schemas (`Store.columnsOf`) instead of
 * per-row Schema decoding: on every row the checks accept they give what the schema gives, and a
 * malformed row still ends in the schema's own error (a defect carrying the same ParseError).
 */
import { describe, expect, it } from "@effect/vitest"
import { Cause, Effect, Either, Exit, Schema } from "effect"
import * as Rows from "../../src/layers/internal/QueueRows.js"
import { inboxRows } from "../../src/layers/internal/SqlInbox.js"
import { columnsOf, decodeRows, rowCheck, SqlInt } from "../../src/layers/internal/Store.js"
import type { ColumnKind } from "../../src/layers/internal/Store.js"

const shapes = {
  events: Rows.EventRow,
  flows: Rows.FlowRow,
  groups: Rows.GroupRow,
  storedGroups: Rows.StoredGroupRow,
  candidates: Rows.CandidateRow,
  identities: Rows.IdentityRow,
  clock: Rows.ClockRow,
  aggregate: Rows.AggregateRow
} as const

/** Every checked row shape: the queue's, then the inbox's. */
const cases: ReadonlyArray<{
  readonly name: string
  readonly schema: Schema.Schema<any, any>
  readonly columns: ReadonlyArray<readonly [string, ColumnKind]>
  readonly decode: (rows: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>>
}> = [
  ...Object.entries(shapes).map(([name, schema]) => ({
    name,
    schema,
    columns: columnsOf(schema) ?? [],
    decode: Rows.decode[name as keyof typeof shapes] as (rows: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>>
  })),
  ...Object.entries(inboxRows).map(([name, schema]) => ({
    name: `inbox ${name}`,
    schema: schema as Schema.Schema<any, any>,
    columns: columnsOf(schema) ?? [],
    decode: decodeRows(schema as Schema.Schema<any, any>) as (rows: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>>
  }))
]

/** Values a column of this kind may hold, as drivers return them. */
const goodValues = (kind: ColumnKind): ReadonlyArray<unknown> => {
  switch (kind) {
    case "string":
      return ["a", "", "😀"]
    case "string?":
    case "optional string?":
      return ["a", null]
    case "int":
    case "optional int":
      return [0, 7, -3, "42", 9007199254740993n]
    case "int?":
      return [null, 5, "12", 3n]
    default:
      return [...kind]
  }
}

const badValues = (kind: ColumnKind): ReadonlyArray<unknown> =>
  typeof kind === "string" && kind.includes("string")
    ? [1, true, {}, undefined]
    : typeof kind === "string"
    ? [true, {}, [], undefined]
    : ["pending", 1, null, undefined]

const baseRow = (columns: ReadonlyArray<readonly [string, ColumnKind]>) =>
  Object.fromEntries(columns.map(([name, kind]) => [name, goodValues(kind)[0]]))

const run = (decode: (rows: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<unknown>>, rows: ReadonlyArray<unknown>) =>
  Effect.runSyncExit(decode(rows))

const bySchema = (schema: Schema.Schema<any, any>, rows: ReadonlyArray<unknown>) => {
  const decoded = Schema.decodeUnknownEither(Schema.Array(schema))(rows)
  return Either.isRight(decoded) ? Exit.succeed(decoded.right) : Exit.die(decoded.left)
}

const same = (actual: Exit.Exit<unknown>, expected: Exit.Exit<unknown>) => {
  if (Exit.isSuccess(expected)) {
    expect(actual).toStrictEqual(expected)
    return
  }
  expect(Exit.isFailure(actual)).toBe(true)
  if (Exit.isFailure(actual) && Exit.isFailure(expected)) {
    const [got, want] = [Cause.squash(actual.cause), Cause.squash(expected.cause)]
    expect((got as { _tag?: string })._tag).toBe("ParseError")
    expect(String(got)).toBe(String(want))
  }
}

describe("row decoding by plain checks", () => {
  for (const { columns, decode, name, schema } of cases) {
    it(`${name}: every accepted row decodes as its schema decodes it (extra columns dropped, driver integer types coerced)`, () => {
      const rows: Array<unknown> = []
      for (const [column, kind] of columns) {
        for (const value of goodValues(kind)) rows.push({ ...baseRow(columns), [column]: value, extra: "ignored" })
      }
      for (const row of rows) expect(rowCheck(columns)(row)).toBeDefined()
      same(run(decode, rows), bySchema(schema, rows))
      same(run(decode, []), bySchema(schema, []))
    })

    it(`${name}: a malformed row fails with the schema's own ParseError, as a defect`, () => {
      for (const [column, kind] of columns) {
        for (const value of badValues(kind)) {
          if (value === undefined && kind.toString().startsWith("optional")) continue
          const row = { ...baseRow(columns), [column]: value }
          const rows = [baseRow(columns), row]
          same(run(decode, rows), bySchema(schema, rows))
          expect(Exit.isFailure(run(decode, rows))).toBe(true)
        }
        if (typeof kind === "string" && kind.startsWith("optional")) {
          const { [column]: _, ...without } = baseRow(columns)
          same(run(decode, [without]), bySchema(schema, [without]))
          expect(Exit.isSuccess(run(decode, [without]))).toBe(true)
        } else {
          const { [column]: _, ...without } = baseRow(columns)
          same(run(decode, [without]), bySchema(schema, [without]))
          expect(Exit.isFailure(run(decode, [without]))).toBe(true)
        }
      }
      for (const notARow of [null, 3, "row"]) same(run(decode, [notARow]), bySchema(schema, [notARow]))
    })
  }

  it("every column of each hot schema is checked, and nothing else", () => {
    for (const { columns, name, schema } of cases) {
      const declared = Object.keys((schema as unknown as Schema.Struct<Schema.Struct.Fields>).fields)
      expect(columns.map(([column]) => column), name).toEqual(declared)
    }
  })

  it("each column's check is read off its schema: strings and brands, SqlInt, nullable, optional, string literals", () => {
    expect(columnsOf(Rows.IdentityRow)).toEqual([
      ["event_id", "string"],
      ["flow_id", "string"],
      ["seq", "int"],
      ["body", "string?"],
      ["body_hash", "optional string?"]
    ])
    expect(columnsOf(Rows.AggregateRow)).toEqual([["at", "int?"], ["n", "optional int"]])
    expect(columnsOf(Rows.EventRow)?.find(([name]) => name === "state")).toEqual(["state", new Set(["ready", "inflight", "acked", "quarantined", "discarded"])])
  })

  it("a schema with a column no plain check can read is decoded by the schema alone", () => {
    expect(columnsOf(Schema.Struct({ id: Schema.NonEmptyString }))).toBeUndefined()
    expect(columnsOf(Schema.Struct({ at: Schema.optional(Schema.NullOr(SqlInt)) }))).toBeUndefined()
    expect(columnsOf(Schema.Struct({ flag: Schema.Boolean }))).toBeUndefined()
    expect(columnsOf(Schema.Array(Schema.String))).toBeUndefined()
    const decode = decodeRows(Schema.Struct({ id: Schema.NonEmptyString }))
    expect(Exit.isFailure(decode([{ id: "" }]))).toBe(true)
    expect(decode([{ id: "a" }])).toStrictEqual(Exit.succeed([{ id: "a" }]))
  })
})
