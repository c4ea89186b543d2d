/**
 * Decoding what callers pass in: every malformed argument becomes an `InvalidInput` with a short
 * message — even arguments that make decoding itself throw (a getter or proxy that throws, a
 * value nested deeper than the stack when the error is formatted).
 */
import { Effect, ParseResult, Schema } from "effect"
import { InvalidInput } from "./Errors.js"

/** Longest message an `InvalidInput` carries: it names the problem, it does not echo the input. */
export const MaxMessageLength = 1_000

/** Cuts a message to `MaxMessageLength`. */
export const shorten = (message: string): string =>
  message.length <= MaxMessageLength ? message : `${message.slice(0, MaxMessageLength - 1)}…`

const describe = (defect: unknown): string => (defect instanceof Error ? defect.message : String(defect))

const formatted = (error: ParseResult.ParseError): string => {
  try {
    return ParseResult.TreeFormatter.formatErrorSync(error)
  } catch {
    return "the argument does not have the expected shape (too deeply nested to describe)"
  }
}

/** Decodes `input` with `schema` for `operation`, failing only with `InvalidInput`. */
export const decodeInput = <A, I>(schema: Schema.Schema<A, I>, operation: string) => (input: unknown): Effect.Effect<A, InvalidInput> =>
  Effect.suspend(() => Schema.decodeUnknown(schema)(input)).pipe(
    Effect.mapError((error) => new InvalidInput({ operation, message: shorten(formatted(error)) })),
    Effect.catchAllDefect((defect) =>
      Effect.fail(new InvalidInput({ operation, message: shorten(`the argument cannot be read: ${describe(defect)}`) })))
  )
