/**
 * How operators' tools (the CLI, the dashboard) show times: one definition for both.
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
