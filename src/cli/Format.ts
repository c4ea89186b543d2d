/**
 * Human output of the operator CLI: aligned tables and key/value blocks, one line per row, with
 * control characters from stored text (reasons, bodies) made harmless.
 */
import { age } from "../domain/Display.js"

// eslint-disable-next-line no-control-regex
const controlCharacters = /[\u0000-\u001f\u007f-\u009f]/g

/** A cell as printed: stored text cannot break the table (newlines, escape sequences). */
export const cell = (value: unknown): string =>
  value === null || value === undefined ? "-" : String(value).replace(controlCharacters, " ")

/**
 * Lines for a person: every control character but the line break made a space, so text a
 * receiver or a producer chose (a reply's code or reason, an id) cannot drive the terminal.
 */
export const lines = (text: string): string => text.split("\n").map(cell).join("\n")

/** An aligned table with a header row; columns are separated by two spaces. */
export const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<unknown>>): string => {
  const cells = rows.map((row) => header.map((_, i) => cell(row[i])))
  const widths = header.map((title, i) => Math.max(title.length, ...cells.map((row) => row[i]!.length)))
  const line = (row: ReadonlyArray<string>) => row.map((value, i) => value.padEnd(widths[i]!)).join("  ").trimEnd()
  return [line(header), ...cells.map(line)].join("\n")
}

/** Aligned `key  value` lines. */
export const fields = (pairs: ReadonlyArray<readonly [string, unknown]>): string => {
  const width = Math.max(...pairs.map(([key]) => key.length))
  return pairs.map(([key, value]) => `${key.padEnd(width)}  ${cell(value)}`.trimEnd()).join("\n")
}

// Ticks are the Clock's milliseconds in production; small values are logical ticks (the demo).
const epochMillis = 1e12

/** A tick, with its wall-clock time when it reads as epoch milliseconds. */
export const tick = (value: number | null): string =>
  value === null ? "-" : value >= epochMillis ? `${value} (${new Date(value).toISOString()})` : String(value)


/** A JSON body on one line, cut to `max` characters. */
export const body = (value: unknown, max = Number.POSITIVE_INFINITY): string => {
  const text = JSON.stringify(value) ?? "null"
  return text.length > max ? `${text.slice(0, max - 1)}…` : text
}

/** The one JSON document a `--json` command prints. */
export const json = (value: unknown): string => JSON.stringify(value, null, 2)

/** @see age */
export { age }

/** A queue's retention windows, in milliseconds ("forever" where one is `null`). */
export const retention = (r: { readonly acked: number | null; readonly dedup: number | null }): string => {
  const window = (ms: number | null) => ms === null ? "forever" : `${ms} ms`
  return `acked events ${window(r.acked)}, dedup records ${window(r.dedup)}`
}
