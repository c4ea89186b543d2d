/**
 * How operators' tools (the CLI, the dashboard) show times and the commands they suggest: one
 * definition for both.
 */

/** A duration in milliseconds, short: `850ms`, `12.3s`, `4m 05s`, `2h 07m`, `3d 04h`. */
export const age = (millis: number): string => {
  if (millis < 1000) return `${Math.round(millis)}ms`
  const seconds = millis / 1000
  if (seconds < 60) return `${seconds.toFixed(1)}s`
  const pad = (n: number) => String(n).padStart(2, "0")
  const s = Math.floor(seconds)
  if (s < 3600) return `${Math.floor(s / 60)}m ${pad(s % 60)}s`
  if (s < 86_400) return `${Math.floor(s / 3600)}h ${pad(Math.floor((s % 3600) / 60))}m`
  return `${Math.floor(s / 86_400)}d ${pad(Math.floor((s % 86_400) / 3600))}h`
}

// Words a POSIX shell reads as themselves: no quoting needed, and none shown (not `=` first,
// which zsh expands).
const plainWord = /^[A-Za-z0-9_@%+:,./-][A-Za-z0-9_@%+=:,./-]*$/

/**
 * `value` as one word for a POSIX shell (sh, bash, zsh): as is when it holds only characters the
 * shell reads literally, else in single quotes, inside which nothing is special but the quote
 * itself (written `'\''`). Ids are chosen by producers: a suggested command must not run them.
 */
export const shellQuote = (value: string | number): string => {
  const text = String(value)
  return plainWord.test(text) ? text : `'${text.replace(/'/g, "'\\''")}'`
}

/** A command line an operator may paste into a POSIX shell, every word quoted (`shellQuote`). */
export const shellCommand = (words: ReadonlyArray<string | number>): string => words.map(shellQuote).join(" ")

/** The command that releases a quarantined head, with a placeholder reason for the operator to write. */
export const redriveCommand = (eventId: string, generation: number): string =>
  shellCommand(["fair-relay", "redrive", eventId, "--generation", generation, "--reason", "…"])
