#!/usr/bin/env node
/**
 * Fails when `src/` reaches into another package's private internals, which an upgrade of that
 * package breaks silently:
 *
 * - an import (static, dynamic, `require`, `createRequire(...)(...)`) of a path the package does
 *   not export (not in its package.json `exports`), or of a file in its build or source folders
 *   (`pg/lib/utils.js`, `effect/internal/…`), which an exports pattern may open but no doc covers;
 * - a member whose name starts with `_` (`client._types`, `pool._ending`; `_tag` is Effect's
 *   public discriminator and allowed);
 * - another package's `globalValue` key (`globalValue("@effect/sql/…")`): ours start with `fair-relay/`;
 * - a value of a dependency's type asserted to a shape its types do not declare
 *   (`client as unknown as { readonly _types: … }`, `statement as { readonly compiler?: … }`);
 * - a value of ours forced into a dependency's type through `unknown` (`new Batch() as unknown as
 *   pg.QueryConfig`, a client rebuilt `as unknown as SqlClient`): an object the package never made;
 * - a member of a dependency's object assigned (`pool.connect = …`): a method patched in place,
 *   which the package's own code then calls.
 *
 * An allow-list (`scripts/internals-allow.txt`, one `file:line` a line) exists for an exception
 * that was argued for; it is meant to stay empty.
 *
 *   node scripts/check-internals.mjs [dir]     # default: src
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { createRequire } from "node:module"
import ts from "typescript"

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..")
const dir = path.resolve(root, process.argv[2] ?? "src")
const require = createRequire(path.join(root, "package.json"))

const allowFile = path.join(root, "scripts", "internals-allow.txt")
const allowed = new Set(
  fs.existsSync(allowFile) ? fs.readFileSync(allowFile, "utf8").split("\n").map((line) => line.trim()).filter((line) => line !== "" && !line.startsWith("#")) : []
)

const files = []
const walk = (at) => {
  for (const entry of fs.readdirSync(at, { withFileTypes: true })) {
    const full = path.join(at, entry.name)
    if (entry.isDirectory()) walk(full)
    else if (/\.(ts|mts|tsx)$/.test(entry.name) && !entry.name.endsWith(".d.ts")) files.push(full)
  }
}
walk(dir)

const config = ts.getParsedCommandLineOfConfigFile(path.join(root, "tsconfig.json"), {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} })
const program = ts.createProgram(files, config?.options ?? { strict: true, module: ts.ModuleKind.NodeNext })
const checker = program.getTypeChecker()

/** The exported subpaths of a package ("." and "./x" keys, patterns with "*"), or undefined when it declares none. */
const exportsOf = (name) => {
  let manifest
  try {
    manifest = JSON.parse(fs.readFileSync(require.resolve(`${name}/package.json`), "utf8"))
  } catch {
    // A package that does not export its package.json: find it on disk.
    const candidate = path.join(root, "node_modules", name, "package.json")
    if (!fs.existsSync(candidate)) return null
    manifest = JSON.parse(fs.readFileSync(candidate, "utf8"))
  }
  const { exports } = manifest
  if (exports === undefined) return undefined
  if (typeof exports === "string" || Array.isArray(exports)) return ["."]
  const keys = Object.keys(exports)
  return keys.some((key) => key.startsWith(".")) ? keys : ["."]
}

const isExported = (keys, subpath) =>
  keys.some((key) => {
    if (key === subpath) return true
    const star = key.indexOf("*")
    return star !== -1 && subpath.startsWith(key.slice(0, star)) && subpath.endsWith(key.slice(star + 1))
  })

/** Why a module specifier reaches inside its package, or undefined. */
const innerPath = (specifier) => {
  if (specifier.startsWith(".") || specifier.startsWith("/") || specifier.startsWith("node:")) return undefined
  const parts = specifier.split("/")
  const name = specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]
  const rest = parts.slice(specifier.startsWith("@") ? 2 : 1).join("/")
  if (rest === "") return undefined
  // A package's build or source folders are its inner files, even where its exports map opens them (pg's "./lib/*").
  if (/^(lib|dist|src|build|esm|cjs|internal)(\/|$)|\/internal(\/|$)/.test(rest)) return `${specifier}: a file inside ${name}'s ${rest.split("/")[0]}/ folder`
  const keys = exportsOf(name)
  if (keys === null) return undefined // not installed: the typecheck says so
  if (keys === undefined) return `${specifier}: ${name} declares no exports, so ${rest} is one of its inner files`
  return isExported(keys, `./${rest}`) ? undefined : `${specifier}: not a path ${name} exports`
}

// The language's and Node's own types (`Error`, `object`): reading a documented field such as an
// error's `code` through them is not a reach into a package.
const platform = [`${path.sep}node_modules${path.sep}typescript${path.sep}`, `${path.sep}node_modules${path.sep}@types${path.sep}node${path.sep}`]

const fromDependency = (type) => {
  // `Connection | undefined`: a dependency's type among others is still one.
  if (type.isUnion()) return type.types.some(fromDependency)
  // A row-like type (`{ [column: string]: unknown }`) declares every key.
  if (type.getStringIndexType() !== undefined) return false
  const declarations = [...(type.getSymbol()?.getDeclarations() ?? []), ...(type.aliasSymbol?.getDeclarations() ?? [])]
  return declarations.some((d) => {
    const file = d.getSourceFile().fileName
    return file.includes(`${path.sep}node_modules${path.sep}`) && !platform.some((dir) => file.includes(dir))
  })
}

const hasTypeLiteral = (node) => {
  let found = false
  const visit = (n) => {
    if (ts.isTypeLiteralNode(n)) found = true
    else ts.forEachChild(n, visit)
  }
  visit(node)
  return found
}

const findings = []
for (const file of program.getSourceFiles()) {
  if (!files.includes(path.resolve(file.fileName))) continue
  const report = (node, message) => {
    const { line } = file.getLineAndCharacterOfPosition(node.getStart(file))
    const where = `${path.relative(root, file.fileName)}:${line + 1}`
    if (!allowed.has(where)) findings.push(`${where}: ${message}`)
  }
  const visit = (node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      const why = innerPath(node.moduleSpecifier.text)
      if (why) report(node, `inner module path ${why}`)
    }
    if (ts.isCallExpression(node) && node.arguments.length > 0 && ts.isStringLiteralLike(node.arguments[0])) {
      const callee = node.expression
      const text = node.arguments[0].text
      const isLoader = callee.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(callee) && callee.text === "require") || ts.isCallExpression(callee)
      if (isLoader) {
        const why = innerPath(text)
        if (why) report(node, `inner module path ${why}`)
      }
      if (ts.isIdentifier(callee) && callee.text === "globalValue" && !text.startsWith("fair-relay/")) {
        report(node, `globalValue key ${JSON.stringify(text)} belongs to another package`)
      }
    }
    if (ts.isPropertyAccessExpression(node) && node.name.text.startsWith("_") && node.name.text !== "_tag") {
      report(node, `private member .${node.name.text}`)
    }
    if (ts.isElementAccessExpression(node) && ts.isStringLiteralLike(node.argumentExpression) && node.argumentExpression.text.startsWith("_") && node.argumentExpression.text !== "_tag") {
      report(node, `private member [${JSON.stringify(node.argumentExpression.text)}]`)
    }
    if ((ts.isAsExpression(node) || ts.isTypeAssertionExpression(node)) && hasTypeLiteral(node.type)) {
      let inner = node.expression
      while (ts.isAsExpression(inner) || ts.isTypeAssertionExpression(inner) || ts.isParenthesizedExpression(inner)) inner = inner.expression
      if (fromDependency(checker.getTypeAtLocation(inner))) {
        report(node, `a value of a dependency's type asserted to a shape its types do not declare: ${node.getText(file).replace(/\s+/g, " ").slice(0, 120)}`)
      }
    }
    if (
      ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.EqualsToken && ts.isPropertyAccessExpression(node.left) &&
      fromDependency(checker.getTypeAtLocation(node.left.expression))
    ) {
      report(node, `a member of a dependency's object patched in place: ${node.left.getText(file)} = …`)
    }
    if (ts.isAsExpression(node) && ts.isAsExpression(node.expression) && node.expression.type.kind === ts.SyntaxKind.UnknownKeyword) {
      if (fromDependency(checker.getTypeFromTypeNode(node.type))) {
        report(node, `a value forced into a dependency's type through unknown: ${node.getText(file).replace(/\s+/g, " ").slice(0, 120)}`)
      }
    }
    ts.forEachChild(node, visit)
  }
  visit(file)
}

if (findings.length > 0) {
  console.error(`${findings.length} reach(es) into other packages' private internals in ${path.relative(root, dir)}/:`)
  for (const finding of findings) console.error(`  ${finding}`)
  process.exit(1)
}
console.log(`no reaches into other packages' private internals in ${path.relative(root, dir)}/ (${files.length} files)`)
