/**
 * Decoding what callers pass in: every malformed argument becomes an `InvalidInput` with a short
 * message — even arguments that make decoding itself throw (a getter or proxy that throws, a
 * value nested deeper than the stack when the error is formatted).
 */
import { Effect, Either, ParseResult, Schema } from "effect"
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

/**
 * A decoder of `schema` for `operation` answering an `Either`, its `Left` an `InvalidInput`, for
 * arguments decoded together (`Either.all`). Build it once (at module level): the schema's parser
 * is compiled when the decoder is made.
 */
export const decodeInputEither = <A, I>(schema: Schema.Schema<A, I>, operation: string) => {
  const decode = Schema.decodeUnknownEither(schema)
  return (input: unknown): Either.Either<A, InvalidInput> => {
    try {
      return Either.mapLeft(decode(input), (error) => new InvalidInput({ operation, message: shorten(formatted(error)) }))
    } catch (defect) {
      // A getter or proxy that throws while being read.
      return Either.left(new InvalidInput({ operation, message: shorten(`the argument cannot be read: ${describe(defect)}`) }))
    }
  }
}

/** A decoded argument as an effect: it succeeds or fails at once. */
export const fromDecoded = <A>(decoded: Either.Either<A, InvalidInput>): Effect.Effect<A, InvalidInput> =>
  decoded._tag === "Right" ? Effect.succeed(decoded.right) : Effect.fail(decoded.left)

/** A decoder of `schema` for `operation`, failing only with `InvalidInput` (see `decodeInputEither`). */
export const decodeInput = <A, I>(schema: Schema.Schema<A, I>, operation: string) => {
  const decode = decodeInputEither(schema, operation)
  return (input: unknown): Effect.Effect<A, InvalidInput> => fromDecoded(decode(input))
}
