/**
 * Where the CLI's text goes: one logfmt line per log event on stderr (a single `message=` key
 * however many parts were logged), and a console that drops ANSI escapes on a stream that is not
 * a terminal or when NO_COLOR is set.
 */
import { Logger } from "effect"
import type { Console } from "effect"

// eslint-disable-next-line no-control-regex
const ansi = /\u001b\[[0-9;]*[A-Za-z]/g

/** `value` without ANSI escapes, when it is text. */
export const strip = (value: unknown): unknown => (typeof value === "string" ? value.replace(ansi, "") : value)

/** Whether a stream may carry colour: a terminal, and NO_COLOR (https://no-color.org) unset. */
export const colorFor = (stream: { readonly isTTY?: boolean | undefined }): boolean =>
  stream.isTTY === true && (process.env.NO_COLOR ?? "") === "" && process.env.TERM !== "dumb"

/** `console` with escapes removed from `log` (stdout) and `error` (stderr) output where colour is unwelcome. */
export const plainConsole = (console: Console.Console, stdoutColor: boolean, stderrColor: boolean): Console.Console => ({
  ...console,
  log: (...args) => console.log(...(stdoutColor ? args : args.map(strip))),
  error: (...args) => console.error(...(stderrColor ? args : args.map(strip)))
})

/** Several logged parts as one message: text as is, anything else as JSON. */
const oneMessage = (message: unknown): unknown =>
  Array.isArray(message) && message.length !== 1
    ? message.map((part) => {
      if (typeof part === "string") return part
      if (part instanceof Error) return part.message
      try {
        return JSON.stringify(part) ?? String(part)
      } catch {
        return String(part)
      }
    }).join(" ")
    : message

/** logfmt on stderr, one `message=` per line. */
export const logger = Logger.withConsoleError(Logger.logfmtLogger.pipe(Logger.mapInput(oneMessage)))
