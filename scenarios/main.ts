/**
 * `npm run demo`: every scenario of docs/protocol.md on real SQLite files in a fresh temporary
 * directory.
 *
 *   npm run demo                      run all, print an account of each, exit 1 if any diverges
 *   npm run demo -- --only NAME       run one scenario
 *   npm run demo -- --json FILE       also write machine-readable results
 *   npm run demo -- --check           compare with the frozen results (scenarios/results.json)
 *   npm run demo -- --freeze          rewrite the frozen results from this run
 *   npm run demo -- --frozen FILE     use another frozen-results file
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { runAll } from "./run.js"

const args = process.argv.slice(2)
const option = (name: string): string | undefined => {
  const i = args.indexOf(name)
  if (i < 0) return undefined
  const value = args[i + 1]
  if (value === undefined || value.startsWith("--")) {
    console.error(`${name} needs a value`)
    process.exit(2)
  }
  return value
}
const known = new Set(["--only", "--json", "--check", "--freeze", "--frozen", "--keep"])
for (const arg of args) {
  if (arg.startsWith("--") && !known.has(arg)) {
    console.error(`unknown option ${arg}; known: ${[...known].join(" ")}`)
    process.exit(2)
  }
}

const here = path.dirname(fileURLToPath(import.meta.url))
const frozenFile = option("--frozen") ?? path.join(here, "results.json")
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "fair-relay-demo-"))

const results = await runAll({ dir, only: option("--only") })
if (results.length === 0) {
  console.error(`no scenario named ${option("--only")}`)
  process.exit(2)
}

let failed = results.filter((r) => !r.ok).length
for (const result of results) {
  console.log(`${result.ok ? "PASS" : "FAIL"}  ${String(result.number).padStart(2)} ${result.name} — ${result.title}`)
  for (const line of result.lines) console.log(`        ${line}`)
  for (const check of result.checks.filter((c) => !c.ok)) {
    console.log(`        ✗ ${check.what}: expected ${JSON.stringify(check.expected)}, got ${JSON.stringify(check.actual)}`)
  }
  if (result.error) console.log(`        ✗ error: ${result.error}`)
}

const facts = Object.fromEntries(results.map((r) => [r.name, r.facts]))
const jsonFile = option("--json")
if (jsonFile) fs.writeFileSync(jsonFile, JSON.stringify(results, null, 2) + "\n")
if (args.includes("--freeze")) {
  const frozen = fs.existsSync(frozenFile) ? JSON.parse(fs.readFileSync(frozenFile, "utf8")) : {}
  fs.writeFileSync(frozenFile, JSON.stringify({ ...frozen, ...facts }, null, 2) + "\n")
  console.log(`froze ${results.length} scenario(s) into ${frozenFile}`)
}
if (args.includes("--check")) {
  const frozen = JSON.parse(fs.readFileSync(frozenFile, "utf8")) as Record<string, unknown>
  for (const [name, value] of Object.entries(facts)) {
    const expected = JSON.stringify(frozen[name])
    const actual = JSON.stringify(value)
    if (expected !== actual) {
      failed++
      console.log(`CHECK FAIL ${name}: differs from ${path.basename(frozenFile)}\n  frozen: ${expected}\n  now:    ${actual}`)
    }
  }
  console.log(`check against ${path.basename(frozenFile)}: ${failed === 0 ? "identical" : "DIFFERENT"}`)
}

if (!args.includes("--keep")) fs.rmSync(dir, { recursive: true, force: true })
else console.log(`stores kept in ${dir}`)
console.log(`${results.length - results.filter((r) => !r.ok).length} passed, ${results.filter((r) => !r.ok).length} failed`)
process.exit(failed === 0 ? 0 : 1)
