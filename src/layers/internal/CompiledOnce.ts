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
 * as a fragment; PostgreSQL's are numbered by their place in the whole statement. There, a
 * statement is built by `sql` as usual, and its text compiled once per shape where it is sent as
 * a whole (`compileWhole`): a daemon step's client instructions fell 4–5 % with it.
 */
import type * as SqlClient from "@effect/sql/SqlClient"
import type * as Statement from "@effect/sql/Statement"
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
  typeof u === "object" && u !== null && (u as Statement.Segment)._tag === "ArrayHelper"
    ? (u as { readonly value: ReadonlyArray<unknown> }).value
    : undefined

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

/**
 * A part of a statement's shape, segment by segment: a parameter (`Value`), a list of that many
 * values, a literal's text, or an identifier (`Name`).
 */
type SegmentPart = typeof Value | number | string | Name

/** An identifier (`sql("name")`), which the compiler quotes. */
class Name {
  constructor(readonly name: string) {}
}

/** A statement shape's parts and its compiled text. */
interface CompiledShape {
  readonly parts: ReadonlyArray<SegmentPart>
  readonly text: string
}

/** The parts of `segments`, or undefined where one is a segment whose text is not its shape's alone. */
const segmentParts = (segments: ReadonlyArray<Statement.Segment>): Array<SegmentPart> | undefined => {
  const parts: Array<SegmentPart> = []
  for (const segment of segments) {
    switch (segment._tag) {
      case "Literal":
        parts.push(segment.value)
        break
      case "Parameter":
        parts.push(Value)
        break
      case "ArrayHelper":
        parts.push(segment.value.length)
        break
      case "Identifier":
        parts.push(new Name(segment.value))
        break
      default:
        return undefined
    }
  }
  return parts
}

/** The values `segments` bind, in the order `compile` binds them, when they have the shape `parts`; else undefined. */
const segmentValues = (parts: ReadonlyArray<SegmentPart>, segments: ReadonlyArray<Statement.Segment>): Array<unknown> | undefined => {
  if (parts.length !== segments.length) return undefined
  const values: Array<unknown> = []
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!
    const segment = segments[i]!
    switch (segment._tag) {
      case "Literal":
        if (part !== segment.value) return undefined
        if (segment.params !== undefined) values.push(...segment.params)
        break
      case "Parameter":
        if (part !== Value) return undefined
        values.push(segment.value)
        break
      case "ArrayHelper":
        if (part !== segment.value.length) return undefined
        values.push(...segment.value)
        break
      case "Identifier":
        if (!(part instanceof Name) || part.name !== segment.value) return undefined
        break
      default:
        return undefined
    }
  }
  return values
}

/** Compiled shapes by compiler (its placeholders and quoting), then by the text of the statement's first literal. */
const shapes = new WeakMap<object, Map<string, Array<CompiledShape>>>()

/** The most first literals kept per compiler (a store has some hundred call sites). */
const MaxFirstTexts = 1_000

/**
 * `statement.compile()` for a statement sent as a whole (PostgreSQL, whose placeholders are
 * numbered across the whole statement, so a statement's text is known only once it is whole).
 * The first statement of a shape — its segments' literal texts, list lengths, identifiers and
 * where its parameters go — is compiled, and its text kept; a later one of that shape is that
 * text (the same string: the prepared statements' names are looked up by it) and its values,
 * gathered from its segments as `compile` gathers them. `sql` builds the segments of a call
 * site's template from the same literal strings every time, so a shape is matched by their
 * identity, segment by segment, without building the text.
 */
export const compileWhole = (statement: Statement.Statement<unknown>): readonly [string, ReadonlyArray<unknown>] => {
  const segments = statement.segments
  const first = segments[0]
  const compiler = (statement as { readonly compiler?: object }).compiler
  // One literal (a template without values, or `sql.unsafe`) compiles to its own text.
  if (segments.length < 2 || first?._tag !== "Literal" || compiler === undefined) return statement.compile()
  let byText = shapes.get(compiler)
  const known = byText?.get(first.value)
  if (known !== undefined) {
    for (const shape of known) {
      const values = segmentValues(shape.parts, segments)
      if (values !== undefined) return [shape.text, values]
    }
  }
  const compiled = statement.compile()
  const [text, values] = compiled
  const parts = segmentParts(segments)
  // What the text binds must be what its shape reads from the segments: otherwise not kept.
  if (parts === undefined || text.length > MaxTextLength || (known?.length ?? 0) >= MaxShapes) return compiled
  if (known === undefined && (byText?.size ?? 0) >= MaxFirstTexts) return compiled
  const fitting = segmentValues(parts, segments)
  if (fitting === undefined || !sameValues(values, fitting)) return compiled
  if (byText === undefined) shapes.set(compiler, byText = new Map())
  if (known === undefined) byText.set(first.value, [{ parts, text }])
  else known.push({ parts, text })
  return compiled
}
