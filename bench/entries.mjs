// What importing each entry point of the compiled library costs a process: RSS and V8 heap in
// use after a full collection, each entry in a fresh `node` (the median of 5 processes), beside
// `effect` alone. For the README's entry points; not part of `npm run bench`:
//
//   npm run build && node bench/entries.mjs
import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../", import.meta.url))
const entries = [
  ["effect (alone)", "effect"],
  ["fair-relay", `${root}dist/index.js`],
  ["fair-relay/core", `${root}dist/core.js`],
  ["fair-relay/sqlite", `${root}dist/sqlite.js`],
  ["fair-relay/postgres", `${root}dist/postgres.js`],
  ["fair-relay/http", `${root}dist/http.js`],
  ["fair-relay/dashboard", `${root}dist/dashboard.js`]
]
const probe = (specifier) =>
  JSON.parse(execFileSync(process.execPath, ["--expose-gc", "--input-type=module", "-e", `
    await import(${JSON.stringify(specifier)})
    globalThis.gc()
    const { heapUsed, rss } = process.memoryUsage()
    console.log(JSON.stringify({ rss, heapUsed }))`], { cwd: root, encoding: "utf8" }))
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
const mb = (bytes) => (bytes / 2 ** 20).toFixed(1)
console.log(`node ${process.version}; RSS and heap in use after importing, median of 5 fresh processes`)
console.log(`${"entry".padEnd(22)} ${"RSS MB".padStart(7)} ${"heap MB".padStart(8)}`)
for (const [name, specifier] of entries) {
  const runs = Array.from({ length: 5 }, () => probe(specifier))
  console.log(`${name.padEnd(22)} ${mb(median(runs.map((r) => r.rss))).padStart(7)} ${mb(median(runs.map((r) => r.heapUsed))).padStart(8)}`)
}
