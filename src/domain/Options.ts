/**
 * Options records as callers write them, checked strictly at the boundary: a value of the wrong
 * kind, a key the record does not have, or a record that is not an object at all is refused with
 * a message naming the option — never read as a default or as something else ("yes" is not
 * `true`, `null` is not "no options", -1 ms is not 0 ms).
 */
import { Duration, Effect, Either, ParseResult, Schema } from "effect"
import { InvalidInput } from "./Errors.js"
import { shorten } from "./Input.js"

/**
 * Longest lease or backoff delay: 3650 days in milliseconds (ticks). With it, a deadline
 * (`now` + lease or delay) stays a safe integer for every clock reading below
 * `Number.MAX_SAFE_INTEGER - MaxTicks` (in epoch milliseconds, some 285 000 years after 1970).
 */
export const MaxTicks = 3650 * 24 * 60 * 60 * 1000

/** How `MaxTicks` reads in a message. */
const maxTicksText = `${MaxTicks} (3650 days in milliseconds, so that now + it stays a safe integer)`

const isPair = (input: unknown): input is readonly [number, number] =>
  Array.isArray(input) && input.length === 2 && input.every((n) => typeof n === "number")

/**
 * Milliseconds of a `Duration.DurationInput`, or `undefined` when it is none or is negative
 * (which `Duration` itself would quietly read as zero), infinite or beyond a safe integer.
 */
const millisOf = (input: unknown): number | undefined => {
  if (typeof input === "number" && !(Number.isFinite(input) && input >= 0)) return undefined
  if (typeof input === "bigint" && input < 0n) return undefined
  if (typeof input === "string" && /^\s*-/.test(input)) return undefined
  if (isPair(input) && !input.every((n) => Number.isFinite(n) && n >= 0)) return undefined
  if (typeof input !== "number" && typeof input !== "bigint" && typeof input !== "string" && !isPair(input) && !Duration.isDuration(input)) {
    return undefined
  }
  const decoded = Duration.decodeUnknown(input)
  if (decoded._tag === "None" || !Duration.isFinite(decoded.value)) return undefined
  const millis = Duration.toMillis(decoded.value)
  return millis <= Number.MAX_SAFE_INTEGER ? millis : undefined
}

/**
 * A duration as a caller writes it (milliseconds, text such as "30 seconds", a `Duration`),
 * decoded to its milliseconds: finite, ≥ 0 and at most `Number.MAX_SAFE_INTEGER`.
 */
export const DurationMillis: Schema.Schema<number, unknown> = Schema.transformOrFail(Schema.Unknown, Schema.Number, {
  strict: true,
  decode: (input, _, ast) => {
    const millis = millisOf(input)
    return millis === undefined
      ? ParseResult.fail(new ParseResult.Type(ast, input, "expected a finite duration ≥ 0 (milliseconds, or text such as \"30 seconds\")"))
      : ParseResult.succeed(millis)
  },
  encode: ParseResult.succeed
})

/** A span of ticks written as a duration: whole milliseconds from `min` to `MaxTicks`. */
export const Ticks = (min: number): Schema.Schema<number, unknown> =>
  DurationMillis.pipe(Schema.compose(Schema.Number.pipe(
    Schema.int({ message: () => "expected whole milliseconds" }),
    Schema.between(min, MaxTicks, { message: () => `expected from ${min} to ${maxTicksText}` })
  )))

/** `true` or `false`, nothing else (not "yes", not 1). */
export const Flag = Schema.Boolean.annotations({ message: () => "expected true or false" })

/** A whole number from `min` to `max`. */
export const Count = (min: number, max: number = Number.MAX_SAFE_INTEGER) =>
  Schema.Number.pipe(Schema.int(), Schema.between(min, max)).annotations({
    message: () => ({
      message: max === Number.MAX_SAFE_INTEGER ? `expected a whole number ≥ ${min}` : `expected a whole number from ${min} to ${max}`,
      override: true
    })
  })

/** One of `values`, spelled exactly. */
export const OneOf = <const L extends ReadonlyArray<string>>(...values: L) =>
  Schema.Literal(...values).annotations({
    message: () => ({ message: `expected ${values.map((v) => JSON.stringify(v)).join(" or ")}`, override: true })
  })

/**
 * An options record: an object with these keys only (each may be absent or `undefined`), named
 * `what` in messages.
 */
export const record = <Fields extends Schema.Struct.Fields>(what: string, fields: Fields, shape = "an object") =>
  Schema.Struct(fields).annotations({ message: () => `${what} must be ${shape}` })

const parseOptions = { onExcessProperty: "error", errors: "first" } as const

/** The first problem of a failed decoding, as `prefix.path: message`. */
const describe = (error: ParseResult.ParseError, prefix: string): string => {
  try {
    const [issue] = ParseResult.ArrayFormatter.formatErrorSync(error)
    if (issue === undefined) return `${prefix}: invalid`
    // At the record itself the message names it already ("policy must be an object").
    if (issue.path.length === 0) return issue.message
    const name = [prefix, ...issue.path.map(String)].filter((part) => part !== "").join(".")
    return `${name}: ${issue._tag === "Unexpected" ? "is not an option here" : issue.message}`
  } catch {
    return `${prefix}: the value does not have the expected shape`
  }
}

/**
 * A plain object without its `undefined` values: a key given as `undefined` reads as absent, as
 * for the record's own options (a spread of another options object may carry such keys).
 */
const present = (input: unknown): unknown => {
  if (typeof input !== "object" || input === null) return input
  const proto = Object.getPrototypeOf(input)
  if (proto !== Object.prototype && proto !== null) return input
  return Object.fromEntries(Object.entries(input).filter(([, value]) => value !== undefined))
}

/**
 * A strict check of an options record: the decoded record, or a message naming the option
 * (`prefix` is the record's own name, e.g. "policy", or "" for the options of a call). Build it
 * once (at module level): the schema's parser is compiled when the check is made.
 */
export const checker = <A, I>(schema: Schema.Schema<A, I>, prefix = "") => {
  const decode = Schema.decodeUnknownEither(schema, parseOptions)
  return (input: unknown): Either.Either<A, string> => {
    try {
      return Either.mapLeft(decode(present(input)), (error) => shorten(describe(error, prefix)))
    } catch (defect) {
      // A getter or proxy that throws while being read.
      return Either.left(shorten(`${prefix || "options"} cannot be read: ${defect instanceof Error ? defect.message : String(defect)}`))
    }
  }
}

/** Like `checker`, as an effect failing with an `InvalidInput` of `operation`. */
export const decoder = <A, I>(schema: Schema.Schema<A, I>, prefix = "") => {
  const check = checker(schema, prefix)
  return (input: unknown, operation: string): Effect.Effect<A, InvalidInput> =>
    Either.match(check(input), {
      onLeft: (message) => Effect.fail(new InvalidInput({ operation, message })),
      onRight: Effect.succeed
    })
}

/** Every key of an options interface, each once (so that a new option cannot be left out). */
export type KeysOf<A> = { readonly [K in keyof Required<A>]: true }

/**
 * The options of a call, as a record of these keys only: an object whose keys are all known.
 * Their values are checked by the parts that use them (each naming its option).
 */
export const keysOnly = <A>(keys: KeysOf<A>) =>
  decoder(record("options", Object.fromEntries(Object.keys(keys).map((name) => [name, Schema.optional(Schema.Unknown)]))))
