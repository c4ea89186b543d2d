/**
 * What the operator CLI does with a failure: one line on stderr and an exit code. Usage errors
 * (the command line is wrong whatever the store holds) exit 2; everything the store or the
 * operation refused exits 1.
 */
import * as ValidationError from "@effect/cli/ValidationError"
import { Cause, Data, Option } from "effect"

/** Exit code of a command line that cannot work (unknown option, malformed value, blank reason). */
export const UsageExit = 2
/** Exit code of an operation the store refused or that failed. */
export const FailureExit = 1

/** A failure raised by the CLI itself, with the code it is printed under and its exit code. */
export class CliFailure extends Data.TaggedError("CliFailure")<{
  /** Short name printed in parentheses, e.g. `StoreNotFound`. */
  readonly code: string
  readonly message: string
  readonly exitCode: number
}> {}

/** A usage error (exit 2). */
export const usage = (code: string, message: string): CliFailure => new CliFailure({ code, message, exitCode: UsageExit })

/** An operation error (exit 1). */
export const failure = (code: string, message: string): CliFailure => new CliFailure({ code, message, exitCode: FailureExit })

// Library errors whose cause is the command line rather than the store's state.
const usageTags = new Set(["InvalidInput", "MissingReason", "RelayConfigError"])

// eslint-disable-next-line no-control-regex
const controlCharacters = /[\u0000-\u001f\u007f-\u009f]+/g

/** Collapses a (possibly multi-line, tree-formatted) message to one line. */
export const oneLine = (text: string): string =>
  text.replace(/\s*\n\s*/g, "; ").replace(controlCharacters, " ").replace(/\s+/g, " ").trim()

const messageOf = (error: unknown): string => {
  if (typeof error === "object" && error !== null && "message" in error) {
    const message = String(error.message)
    // A database error's own message is generic ("Failed to execute statement"): add the driver's.
    const cause = "cause" in error ? error.cause : undefined
    return cause instanceof Error && !message.includes(cause.message) ? `${message}: ${cause.message}` : message
  }
  return String(error)
}

/** What to print for a failed command (nothing when @effect/cli already printed it) and the exit code. */
export const report = (cause: Cause.Cause<unknown>): { readonly line: string | undefined; readonly exitCode: number } => {
  const failure = Cause.failureOption(cause)
  if (Option.isNone(failure)) {
    const defect = Cause.squash(cause)
    return { line: `fair-relay: unexpected error: ${oneLine(messageOf(defect))}`, exitCode: FailureExit }
  }
  const error = failure.value
  // @effect/cli printed its own message (and help where useful) before failing.
  if (ValidationError.isValidationError(error)) return { line: undefined, exitCode: UsageExit }
  if (error instanceof CliFailure) return { line: `fair-relay: ${oneLine(error.message)} (${error.code})`, exitCode: error.exitCode }
  const tag = typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : "Error"
  return {
    line: `fair-relay: ${oneLine(messageOf(error))} (${tag})`,
    exitCode: usageTags.has(tag) ? UsageExit : FailureExit
  }
}
