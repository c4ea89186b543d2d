/**
 * A PostgreSQL statement's text compiled once per shape where it is sent as a whole
 * (`make`): its placeholders are numbered by their place in the whole statement, so a
 * statement's text is known only once it is whole; compiled once per shape, a call of a known
 * shape skips that work on the client.
 */
import type * as Statement from "@effect/sql/Statement"

/** A parameter in a statement's shape. */
const Value = null

/** The most shapes kept per first literal (a bulk statement's text changes with its row count). */
const MaxShapes = 16

/** The longest text kept: a bulk statement's build is shared by its rows; its text is not worth keeping. */
const MaxTextLength = 8_192

const sameValues = (a: ReadonlyArray<unknown>, b: ReadonlyArray<unknown>) => a.length === b.length && a.every((value, i) => value === b[i])

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

/** The most first literals kept (a store has some hundred call sites). */
const MaxFirstTexts = 1_000

/** `statement.compile()`, each shape's text compiled once (`make`). */
export type CompileWhole = (statement: Statement.Statement<unknown>) => readonly [string, ReadonlyArray<unknown>]

/**
 * `statement.compile()` for the statements of one client, sent as a whole (PostgreSQL, whose
 * placeholders are numbered across the whole statement, so a statement's text is known only once
 * it is whole). The first statement of a shape — its segments' literal texts, list lengths,
 * identifiers and where its parameters go — is compiled, and its text kept; a later one of that
 * shape is that text (the same string: the prepared statements' names are looked up by it) and its
 * values, gathered from its segments as `compile` gathers them. `sql` builds the segments of a
 * call site's template from the same literal strings every time, so a shape is matched by their
 * identity, segment by segment, without building the text.
 *
 * The texts kept are one client's (its compiler's placeholders and quoting, its identifiers'
 * transform): a store makes its own (`PgHeldWrites.make`), since all its statements are built by
 * its one client.
 */
export const make = (): CompileWhole => {
  // Compiled shapes by the text of the statement's first literal.
  const byText = new Map<string, Array<CompiledShape>>()
  return (statement) => {
    const segments = statement.segments
    const first = segments[0]
    // One literal (a template without values, or `sql.unsafe`) compiles to its own text.
    if (segments.length < 2 || first?._tag !== "Literal") return statement.compile()
    const known = byText.get(first.value)
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
    if (known === undefined && byText.size >= MaxFirstTexts) return compiled
    const fitting = segmentValues(parts, segments)
    if (fitting === undefined || !sameValues(values, fitting)) return compiled
    if (known === undefined) byText.set(first.value, [{ parts, text }])
    else known.push({ parts, text })
    return compiled
  }
}
