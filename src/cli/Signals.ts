/**
 * Which signal stopped the CLI: NodeRuntime interrupts the command on SIGINT/SIGTERM; this module
 * remembers which one came, for `run`'s summary and the exit code (128 + signal number: 130, 143).
 */

let first: NodeJS.Signals | undefined

/** Starts recording SIGINT and SIGTERM (NodeRuntime's own handlers still interrupt the command). */
export const listen = (): void => {
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => (first ??= signal))
}

/** The first signal received, if any. */
export const received = (): NodeJS.Signals | undefined => first

/** The exit code of a command stopped by a signal: 130 for SIGINT, 143 for SIGTERM. */
export const exitCode = (): number => (first === "SIGTERM" ? 143 : 130)
