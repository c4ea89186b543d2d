/**
 * `sql` for a SQLite store's own statements with each statement's text compiled once. Building a
 * statement with `sql` makes a segment per literal and per value, and compiling it concatenates
 * them afresh, for each of a daemon worker's some ten statements per event: compiled once, the
 * event runs 4 % fewer instructions (`bench/instructions.sh`: 1,524,074 → 1,463,489). Here a template
 * whose interpolations are values, `sql.in` lists and single-literal fragments (`sql.literal`,
 * `rowsTable`, another statement made here) has its text compiled by `sql` the first time a call
 * site meets its shape — the length of each list, the text of each fragment — and is made after
 * that as `sql.unsafe(text, values)`: the same text and the same values in the same order, as the
 * first build checks; anything else is `sql`'s own statement.
 *
 * SQLite only: its placeholders are all `?`, so a compiled text may also go into another statement
 * as a fragment; PostgreSQL's are numbered by their place in the whole statement.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type { Segment } from "@effect/sql/Statement"
import { isSqlite, literalOf, withTemplates } from "./Store.js"

/** What an interpolation is: a value (`Value`), a list of that many values, or a fragment of that one text. */
type Part = typeof Value | number | string
const Value = null

/** A call site's texts by shape: one shape's parts, one per interpolation, and its text. */
interface Compiled {
  readonly parts: ReadonlyArray<Part>
  readonly text: string
}

/** The most shapes kept per call site (a bulk statement's text changes with its row count). */
const MaxShapes = 16

/** The longest text kept: a bulk statement's build is shared by its rows; its text is not worth keeping. */
const MaxTextLength = 8_192

const isValue = (u: unknown): boolean =>
  u === null || typeof u === "string" || typeof u === "number" || typeof u === "bigint" || typeof u === "boolean"

/** `sql.in`'s list (its segment, as `sql` builds it), or undefined. */
const listOf = (u: unknown): ReadonlyArray<unknown> | undefined =>
  typeof u === "object" && u !== null && (u as Segment)._tag === "ArrayHelper" ? (u as { readonly value: ReadonlyArray<unknown> }).value : undefined

/** The parts of `args`, or undefined when one is none of them. */
const partsOf = (args: ReadonlyArray<unknown>): Array<Part> | undefined => {
  const parts: Array<Part> = []
  for (const arg of args) {
    if (isValue(arg)) parts.push(Value)
    else {
      const list = listOf(arg)
      const literal = list === undefined ? literalOf(arg) : undefined
      if (list !== undefined) parts.push(list.length)
      else if (literal !== undefined) parts.push(literal.value)
      else return undefined
    }
  }
  return parts
}

/** The values `args` bind, in the order of the text's placeholders, when they have the shape `parts`; else undefined. */
const valuesFitting = (parts: ReadonlyArray<Part>, args: ReadonlyArray<unknown>): Array<unknown> | undefined => {
  if (parts.length !== args.length) return undefined
  const values: Array<unknown> = []
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!
    const arg = args[i]
    if (part === Value) {
      if (!isValue(arg)) return undefined
      values.push(arg)
    } else if (typeof part === "number") {
      const list = listOf(arg)
      if (list?.length !== part) return undefined
      values.push(...list)
    } else {
      const literal = literalOf(arg)
      if (literal?.value !== part) return undefined
      values.push(...(literal.params ?? []))
    }
  }
  return values
}

const sameValues = (a: ReadonlyArray<unknown>, b: ReadonlyArray<unknown>) => a.length === b.length && a.every((value, i) => value === b[i])

/** `sql` with each call site's text compiled once per shape (see above); `sql` itself on any dialect but SQLite's. */
export const compiledOnce = (sql: SqlClient.SqlClient): SqlClient.SqlClient => {
  if (!isSqlite(sql)) return sql
  const sites = new WeakMap<TemplateStringsArray, Array<Compiled>>()
  const build = (strings: TemplateStringsArray, args: ReadonlyArray<unknown>) => {
    const compiled = sites.get(strings)
    if (compiled !== undefined) {
      for (const known of compiled) {
        const values = valuesFitting(known.parts, args)
        if (values !== undefined) return sql.unsafe(known.text, values)
      }
    }
    const statement = sql(strings, ...args)
    const parts = partsOf(args)
    if (parts === undefined || (compiled?.length ?? 0) >= MaxShapes) return statement
    const [text, values] = statement.compile()
    // What the text binds must be what its shape reads from the arguments: otherwise not kept.
    if (text.length > MaxTextLength || !sameValues(values, valuesFitting(parts, args)!)) return statement
    if (compiled === undefined) sites.set(strings, [{ parts, text }])
    else compiled.push({ parts, text })
    return statement
  }
  return withTemplates(sql, build)
}
