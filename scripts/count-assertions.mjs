#!/usr/bin/env node
/**
 * Counts the type assertions (`x as T` and `<T>x`, not `as const`) in the TypeScript files under
 * the given directories (default: src), by the TypeScript compiler's syntax tree, so assertions in
 * comments and strings are not counted. Prints one line per file with any, then the total;
 * `--json` prints the same as JSON.
 *
 *   node scripts/count-assertions.mjs [--json] [dir ...]
 */
import * as fs from "node:fs"
import * as path from "node:path"
import ts from "typescript"

const args = process.argv.slice(2)
const json = args.includes("--json")
const roots = args.filter((arg) => arg !== "--json")

const files = (dir) =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const at = path.join(dir, entry.name)
    if (entry.isDirectory()) return files(at)
    return /\.(ts|tsx|mts|cts)$/.test(entry.name) && !entry.name.endsWith(".d.ts") ? [at] : []
  })

const isAsConst = (node) =>
  ts.isAsExpression(node) && ts.isTypeReferenceNode(node.type) && ts.isIdentifier(node.type.typeName) &&
  node.type.typeName.text === "const"

const count = (file) => {
  const source = ts.createSourceFile(file, fs.readFileSync(file, "utf8"), ts.ScriptTarget.Latest, true)
  let n = 0
  const visit = (node) => {
    if ((ts.isAsExpression(node) && !isAsConst(node)) || ts.isTypeAssertionExpression(node)) n++
    ts.forEachChild(node, visit)
  }
  visit(source)
  return n
}

const byFile = {}
let total = 0
for (const file of (roots.length === 0 ? ["src"] : roots).flatMap(files).sort()) {
  const n = count(file)
  if (n > 0) byFile[file] = n
  total += n
}
if (json) console.log(JSON.stringify({ total, byFile }, null, 2))
else {
  for (const [file, n] of Object.entries(byFile)) console.log(`${String(n).padStart(4)}  ${file}`)
  console.log(`${String(total).padStart(4)}  total`)
}
