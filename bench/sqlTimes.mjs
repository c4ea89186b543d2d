// Times every better-sqlite3 statement of a process by its text, for diagnosis (not part of a
// bench run). Preload it; at exit it prints the statements by total time (calls, mean, median):
//
//   node --import tsx --import ./bench/sqlTimes.mjs bench/profile.ts 3000 --single
//
// Only the native call is timed (no Effect, no decoding); a time includes any GC it triggered.
import { createRequire } from "node:module"

const Database = createRequire(import.meta.url)("better-sqlite3")
const totals = new Map()
const prepare = Database.prototype.prepare
const short = (text) => {
  const flat = text.replace(/\s+/g, " ")
  return flat.length <= 120 ? flat : `${flat.slice(0, 60)} … ${flat.slice(-60)}`
}

Database.prototype.prepare = function(text) {
  const statement = prepare.call(this, text)
  const key = `${this.name.split("/").pop()}: ${short(text)}`
  for (const method of ["run", "all", "get"]) {
    const call = statement[method]
    statement[method] = function(...args) {
      const started = process.hrtime.bigint()
      try {
        return call.apply(this, args)
      } finally {
        const entry = totals.get(key) ?? { calls: 0, nanos: [] }
        entry.calls++
        entry.nanos.push(Number(process.hrtime.bigint() - started))
        totals.set(key, entry)
      }
    }
  }
  return statement
}

process.on("exit", () => {
  const rows = [...totals].map(([key, { calls, nanos }]) => {
    const sorted = nanos.sort((a, b) => a - b)
    return { key, calls, total: sorted.reduce((a, b) => a + b, 0), median: sorted[sorted.length >> 1] }
  }).sort((a, b) => b.total - a.total)
  const all = rows.reduce((sum, row) => sum + row.total, 0)
  console.error(`SQL total ${(all / 1e6).toFixed(0)} ms`)
  for (const row of rows.slice(0, 30)) {
    console.error(
      `${(row.total / 1e6).toFixed(1).padStart(8)} ms ${String(row.calls).padStart(7)}× ` +
        `mean ${(row.total / 1e3 / row.calls).toFixed(1).padStart(7)} µs, median ${(row.median / 1e3).toFixed(1).padStart(7)} µs  ${row.key}`
    )
  }
})
