/**
 * Child side of the real-process scenarios: JSON lines out on stdout, JSON-line commands in on
 * stdin. Writes to a pipe are synchronous on Linux, so a line written just before
 * `process.exit` reaches the parent.
 */
import { createInterface } from "node:readline"

/** Writes one message line to the parent. */
export const emit = (message: { readonly type: string } & Readonly<Record<string, unknown>>): void => {
  process.stdout.write(`${JSON.stringify(message)}\n`)
}

/** A command read from stdin, or `undefined` once the parent closed stdin. */
export type Command = Readonly<Record<string, unknown>> | undefined

/** Reads the parent's commands, one JSON object per line. */
export const commands = () => {
  const lines = createInterface({ input: process.stdin })
  const iterator = lines[Symbol.asyncIterator]()
  return {
    next: async (): Promise<Command> => {
      const result = await iterator.next()
      if (result.done) return undefined
      const parsed: unknown = JSON.parse(result.value)
      if (typeof parsed !== "object" || parsed === null) throw new Error(`bad command line: ${result.value}`)
      return parsed as Readonly<Record<string, unknown>>
    },
    close: () => {
      lines.close()
      process.stdin.destroy()
    }
  }
}

/** Runs a child's main function: exit 0 when it returns, 1 (with the error on stderr) when it throws. */
export const runMain = (main: () => Promise<void>): void => {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      process.stderr.write(`${error instanceof Error ? error.stack ?? error.message : String(error)}\n`)
      process.exit(1)
    }
  )
}

/** A string argument of a command, or an error. */
export const stringField = (command: Command, field: string): string => {
  const value = command?.[field]
  if (typeof value !== "string") throw new Error(`command ${JSON.stringify(command)} lacks string field ${field}`)
  return value
}

/** A numeric argument of a command, or an error. */
export const numberField = (command: Command, field: string): number => {
  const value = command?.[field]
  if (typeof value !== "number") throw new Error(`command ${JSON.stringify(command)} lacks number field ${field}`)
  return value
}

/** Renders an unknown failure (an Effect error, a defect) as text for the parent. */
export const describeError = (error: unknown): string => {
  if (typeof error === "object" && error !== null) {
    const tag = (error as { _tag?: unknown })._tag
    const message = (error as { message?: unknown }).message
    const cause = (error as { cause?: unknown }).cause
    const causeText = cause instanceof Error ? ` (cause: ${cause.message})` : ""
    return `${typeof tag === "string" ? `${tag}: ` : ""}${typeof message === "string" ? message : String(error)}${causeText}`
  }
  return String(error)
}
