/** An integer environment variable (undefined when unset or blank); anything else is refused. */
export const envInt = (name: string): number | undefined => {
  const raw = process.env[name]
  if (raw === undefined || raw.trim() === "") return undefined
  const n = Number(raw)
  if (!Number.isSafeInteger(n)) throw new Error(`${name} must be an integer, got ${JSON.stringify(raw)}`)
  return n
}
